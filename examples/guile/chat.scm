;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; examples/guile/chat.scm — a streaming chat REPL over (sonicboom), the model's chat format and
;;; one session whose KV cache keeps the conversation (each turn evaluates only its new tokens):
;;;   guile -L bindings/guile examples/guile/chat.scm [MODEL [N-PREDICT [TEMP]]]
;;; MODEL defaults to the embedded model. One line of input is one user turn; its answer streams
;;; as it is generated and ends with a newline. /reset forgets the conversation; EOF ends.
(use-modules (sonicboom) (ice-9 rdelim))

(define args (cdr (command-line)))
(define (arg i default) (if (> (length args) i) (list-ref args i) default))
(define model (model-load (arg 0 "models/sonicboom-kjv-13m-q8_0.gguf")))
(define n-predict (string->number (arg 1 "128")))
(define sampler (make-sampler model #:temp (string->number (arg 2 "0.7"))))
(define session (session-create model))                 ; the model's context, at most 4096
(define interactive? (isatty? (current-input-port)))

(let loop ((history '()))
  (when interactive? (display "> ") (force-output))
  (let ((line (read-line)))
    (cond ((eof-object? line) (exit 0))
          ((string=? line "/reset") (loop '()))
          (else
           (let* ((turn (append history (list (cons 'user line))))
                  (result (generate session sampler (chat-tokenize model turn) #:n-predict n-predict
                                    #:on-text (lambda (text token) (display text) (force-output) #t))))
             (newline)
             (sampler-reset! sampler)
             (loop (append turn (list (cons 'assistant (assq-ref result 'text))))))))))
