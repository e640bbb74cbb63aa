;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; tests/guile/test_cuda.scm — the Scheme llama decoder of (sonicboom llama) on CUDA:
;;;   guile -L bindings/guile tests/guile/test_cuda.scm DATA
;;; (run through tests/guile/run.sh). Exits 77 (SKIP, with the reason) where no GPU is usable. On
;;; GPU 0: the decoder with its caches on 'cuda, traced for 'cuda, against the C builder's session on
;;; 'cuda (f32 KV cache) on the llama and qwen2 F32 test models — a prefill's logits for every token
;;; (NMSE <= 1e-6: the same plan on the same executor) and a decode step after it — and against the
;;; C builder on the CPU (NMSE <= 1e-5, tests/runtime/test_cuda_models.c's CUDA-vs-CPU limit for
;;; F32 files); decode steps of a decoder traced with #:reuse-outputs? (page-locked results written
;;; by the GPU directly, inputs refilled with tensor-write!) against the session's, step by step.
;;; Prints one FAIL line per failed check and "N passed, N failed".
(use-modules (sonicboom)
             (sonicboom tensor)
             (sonicboom graph)
             (sonicboom llama)
             (rnrs bytevectors)
             (ice-9 format)
             (srfi srfi-1))

(define data (cadr (command-line)))
(define (model-path name) (string-append data "/models/test-" name ".gguf"))

(let ((info (backend-info)))
  (when (or (zero? (assq-ref info 'cuda_compiled)) (zero? (assq-ref info 'cuda_devices)))
    (format #t "SKIP: no usable GPU (~a)\n"
            (if (zero? (assq-ref info 'cuda_compiled)) "a build without CUDA" (assq-ref info 'cuda_error)))
    (exit 77)))

(include "harness.scm")


(define ids '(1 15 300 22 7 99 4 250 31 2))
(define T (length ids))

(for-each
 (lambda (name)
   (let* ((path (model-path name))
          (m (model-load path))
          (V (assq-ref (model-info m) 'n_vocab))
          (label (lambda (what) (string-append name " on CUDA: " what)))
          (s (session-create m #:n-ctx 64 #:kv-type 'f32 #:device 'cuda))
          (s-cpu (session-create m #:n-ctx 64 #:kv-type 'f32))
          (ref (f32s (session-eval-all! s ids V)))
          (ref-cpu (f32s (session-eval-all! s-cpu ids V)))
          (traced (trace (llama-decoder m path #:n-ctx 64 #:device 'cuda) #:device 'cuda))
          (out (traced (tokens ids) (positions (iota T))))
          (lt (tensor->list out)))
     (check (label "the C session runs on the GPU") (eq? (session-device s) 'cuda))
     (check (label "the traced program's output is a CUDA tensor") (eq? (tensor-device out) 'cuda) (tensor-device out))
     (check (label "reference logits are not trivial") (> (fold + 0 (map abs ref)) 1.0))
     (check (label "traced logits = the C builder's on CUDA (NMSE <= 1e-6)")
            (and (= (length lt) (* V T)) (<= (nmse lt ref) 1e-6)) (nmse lt ref))
     (check (label "traced logits = the C builder's on the CPU (NMSE <= 1e-5)") (<= (nmse lt ref-cpu) 1e-5) (nmse lt ref-cpu))
     ;; a decode step reads the caches the prefill wrote (on the GPU)
     (session-decode! s 77)
     (let ((d (tensor->list (traced (tokens '(77)) (positions (list T)))))
           (r (f32s (session-logits s))))
       (check (label "decode step = the C builder's on CUDA (NMSE <= 1e-6)") (<= (nmse d r) 1e-6) (nmse d r)))
     (check (label "one graph per shape (prefill, decode)") (= 2 (length (traced-paths traced))))
     ;; results reused in page-locked memory (the GPU writes them directly once a step's graph is
     ;; captured), inputs refilled in place (the repeat path): each step against the session's
     (session-truncate! s T)
     (let* ((reused (trace (llama-decoder m path #:n-ctx 64 #:device 'cuda) #:device 'cuda #:reuse-outputs? #t))
            (tok (tokens '(0))) (pos (positions '(0))))
       (reused (tokens ids) (positions (iota T)))
       (for-each
        (lambda (t i)
          (session-decode! s t)
          (tensor-write! tok (list t))
          (tensor-write! pos (list (+ T i)))
          (let ((d (tensor->list (reused tok pos))) (r (f32s (session-logits s))))
            (check (label (format #f "reused page-locked result, step ~a = the C builder's (NMSE <= 1e-6)" i))
                   (<= (nmse d r) 1e-6) (nmse d r))))
        '(77 5 300 9) (iota 4)))
     (session-free! s)
     (session-free! s-cpu)))
 '("llama-f32" "qwen2-f32"))

(finish)
