;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; tests/guile/test_sonicboom.scm — the (sonicboom) Guile binding against the C side:
;;;   guile -L bindings/guile tests/guile/test_sonicboom.scm SB PROBE FAKE_LIB DATA EMBEDDED_MODEL
;;; (run through tests/guile/run.sh, which finds guile and sets GUILE_SONICBOOM_LIB). SB is the sb
;;; CLI, PROBE tests/guile/abi_probe (the C compiler's struct layouts, sb_chat_render from C),
;;; FAKE_LIB a library claiming version 2.0.0, DATA ../shared/testdata. Prints one FAIL line per
;;; failed check and "N passed, N failed"; exits 1 if any check failed.
(use-modules (sonicboom)
             (system foreign)
             (rnrs bytevectors)
             ((rnrs io ports) #:select (get-bytevector-all get-string-all))
             (ice-9 popen)
             (ice-9 format)
             (ice-9 exceptions)
             (srfi srfi-1)
             (srfi srfi-11))

(define-values (sb probe fake-lib data embedded)
  (apply values (cdr (command-line))))
(define llama-f32 (string-append data "/models/test-llama-f32.gguf"))

;;; ---- the harness ----

(include "harness.scm")

(define (status-is? e status) (and (sonicboom-error? e) (eq? (sonicboom-error-status e) status)))

;; Run a program: (values status stdout-bytes stderr-text); stderr goes through a file. The
;; program runs without LD_PRELOAD: in a sanitizer build run.sh preloads the ASan runtime for guile,
;; and sb and abi_probe carry their own.
(define (run-program prog . args)
  (let* ((err (format #f "~a/sb-guile-test-~a.err" (or (getenv "TMPDIR") "/tmp") (getpid)))
         (port (apply open-pipe* OPEN_READ "sh" "-c" "f=$1; shift; unset LD_PRELOAD; exec \"$@\" 2>\"$f\""
                      "sh" err prog args))
         (out (get-bytevector-all port))
         (status (status:exit-val (close-pipe port)))
         (err-text (if (file-exists? err) (call-with-input-file err get-string-all) "")))
    (when (file-exists? err) (delete-file err))
    (values status (if (eof-object? out) (make-bytevector 0) out) err-text)))

(define (read-file-bytes path)
  (let ((bv (call-with-input-file path get-bytevector-all #:binary #t)))
    (if (eof-object? bv) (make-bytevector 0) bv)))

;;; ---- 1. struct layouts: Guile's make-c-struct against the C compiler's offsetof ----

;; probe lines: "NAME SIZE" and "NAME.FIELD OFFSET SIZE"
(define probe-lines
  (let-values (((st out err) (run-program probe "layout")))
    (check "abi_probe layout runs" (= st 0) err)
    (map (lambda (l) (string-split l #\space))
         (filter (lambda (l) (not (string-null? l))) (string-split (utf8->string out) #\newline)))))

(define (probe-size name)
  (let ((l (find (lambda (l) (and (= 2 (length l)) (string=? (car l) (symbol->string name)))) probe-lines)))
    (and l (string->number (cadr l)))))

(define (probe-fields name)
  (let ((prefix (string-append (symbol->string name) ".")))
    (filter-map (lambda (l)
                  (and (= 3 (length l)) (string-prefix? prefix (car l))
                       (list (string->symbol (substring (car l) (string-length prefix)))
                             (string->number (cadr l)) (string->number (caddr l)))))
                probe-lines)))

(define (elem-type t) (if (pair? t) (car t) t))
(define (type-size t) (if (pair? t) (* (cadr t) (sizeof (car t))) (sizeof t)))
(define (sentinel t i) (if (eq? t '*) (make-pointer (+ #x10000 i))
                           (if (or (eqv? t float) (eqv? t double)) (+ 1.5 i) (+ 100 i))))
(define (zero t) (if (eq? t '*) %null-pointer 0))

;; Write the sentinel into field k (its first element for an array) with make-c-struct, then read
;; it back at the C offset; every byte outside the C field must stay zero.
(define (check-field struct layout k c-off c-size)
  (let* ((values (map (lambda (f i)
                        (let* ((t (cadr f)) (v (if (= i k) (sentinel (elem-type t) i) (zero (elem-type t)))))
                          (if (pair? t) (cons v (make-list (- (cadr t) 1) (zero (car t)))) v)))
                      layout (iota (length layout))))
         (p (make-c-struct (%struct-types struct) values))
         (size (sizeof (%struct-types struct)))
         (bytes (pointer->bytevector p size))
         (t (cadr (list-ref layout k)))
         (got (car (parse-c-struct (make-pointer (+ (pointer-address p) c-off)) (list (elem-type t)))))
         (want (sentinel (elem-type t) k)))
    (check (format #f "~a.~a: the value Guile writes is at C's offset ~a" struct (car (list-ref layout k)) c-off)
           (equal? got want) got want)
    (check (format #f "~a.~a: Guile's size ~a is C's" struct (car (list-ref layout k)) (type-size t))
           (= (type-size t) c-size))
    (let ((stray (filter (lambda (i) (and (not (and (>= i c-off) (< i (+ c-off (sizeof (elem-type t))))))
                                          (not (zero? (bytevector-u8-ref bytes i)))))
                         (iota size))))
      (check (format #f "~a.~a: nothing written outside the field" struct (car (list-ref layout k)))
             (null? stray) stray))))

(for-each
 (lambda (entry)
   (let* ((struct (car entry)) (layout (cdr entry)) (c-fields (probe-fields struct)))
     (check (format #f "~a: sizeof ~a in Guile, ~a in C" struct (sizeof (%struct-types struct)) (probe-size struct))
            (eqv? (sizeof (%struct-types struct)) (probe-size struct)))
     (check (format #f "~a: the same fields in the same order as C" struct)
            (equal? (map car layout) (map car c-fields)) (map car layout) (map car c-fields))
     (when (equal? (map car layout) (map car c-fields))
       (for-each (lambda (cf k) (check-field struct layout k (cadr cf) (caddr cf)))
                 c-fields (iota (length c-fields))))))
 %struct-layouts)
(check "every struct the binding marshals was probed" (= (length %struct-layouts) 9) (map car %struct-layouts))

;; Through a C function that fills a struct: the library's documented sampling defaults.
(let ((d (sampler-default-params)))
  (check "sampler defaults read through sb_sampler_default_params"
         (and (< (abs (- (assq-ref d 'temp) 0.8)) 1e-6) (= (assq-ref d 'top_k) 40)
              (< (abs (- (assq-ref d 'top_p) 0.95)) 1e-6) (< (abs (- (assq-ref d 'min_p) 0.05)) 1e-6)
              (= (assq-ref d 'repeat_penalty) 1.0) (= (assq-ref d 'presence_penalty) 0.0)
              (= (assq-ref d 'penalty_last_n) 64))
         d))

;;; ---- 2. version ----

(let-values (((st out err) (run-program sb "version")))
  (check "sonicboom-version is the library version sb reports"
         (and (= st 0) (string-contains (utf8->string out) (string-append "(library " sonicboom-version ")"))
              (= sonicboom-version-number 1000))
         sonicboom-version sonicboom-version-number (utf8->string out)))

;; The module refuses a library of another version, and a library path that does not load.
(define (load-module-with lib)
  (run-program "env" (string-append "GUILE_SONICBOOM_LIB=" lib)
               (string-append "LD_PRELOAD=" (or (getenv "LD_PRELOAD") ""))
               (or (getenv "SB_GUILE") "guile") "--no-auto-compile"
               "-L" (dirname (search-path %load-path "sonicboom.scm")) "-c" "(use-modules (sonicboom))"))
(let-values (((st out err) (load-module-with fake-lib)))
  (check "a 2.0.0 library is refused at load"
         (and (not (= st 0)) (string-contains err "is version 2.0.0 (2000000), this binding needs 0.1.x")) st err))
(let-values (((st out err) (load-module-with "/nonexistent/libsonicboom.so")))
  (check "a library that does not load: the path and GUILE_SONICBOOM_LIB are named"
         (and (not (= st 0)) (string-contains err "cannot load /nonexistent/libsonicboom.so")
              (string-contains err "GUILE_SONICBOOM_LIB"))
         st err))

;;; ---- 3. greedy generation equals `sb run` byte for byte ----

(define (sb-run-greedy model prompt n)
  (let-values (((st out err) (run-program sb "run" "-m" model "-p" prompt "-n" (number->string n) "--temp" "0"
                                          "-t" "2" "--device" "cpu" "--no-display-prompt" "--log-disable")))
    (check (format #f "sb run on ~a" model) (= st 0) err)
    ;; sb run ends the text with one newline of its own
    (let ((len (bytevector-length out)))
      (if (and (> len 0) (= 10 (bytevector-u8-ref out (- len 1))))
          (let ((bv (make-bytevector (- len 1)))) (bytevector-copy! out 0 bv 0 (- len 1)) bv)
          out))))

(define (check-greedy model prompt n)
  (let* ((m (model-load model))
         (s (session-create m #:n-threads 2 #:device 'cpu))
         (smp (make-sampler m #:temp 0))
         (pieces '())
         (r (generate s smp prompt #:n-predict n #:bytes? #t
                      #:on-text (lambda (text token) (set! pieces (cons (cons text token) pieces)) #t)))
         (want (sb-run-greedy model prompt n)))
    (check (format #f "~a: greedy text equals sb run's (~a bytes)" model (bytevector-length want))
           (and (> (bytevector-length want) 0) (equal? (assq-ref r 'text) want)) (assq-ref r 'text) want)
    (check (format #f "~a: the callback's pieces make the text" model)
           (equal? (apply bytevector-concat (reverse (map car pieces))) (assq-ref r 'text)))
    (check (format #f "~a: ~a tokens generated, stop length" model n)
           (and (= (assq-ref r 'n_generated) n) (eq? (assq-ref r 'stop) 'length)) r)
    (check (format #f "~a: each piece comes with a token id" model)
           (every (lambda (p) (and (exact-integer? (cdr p)) (>= (cdr p) -1))) pieces))
    ;; the same session again: the prompt is reused from the cache, the text is the same
    (let ((r2 (generate s (make-sampler m #:temp 0) prompt #:n-predict n #:bytes? #t)))
      (check (format #f "~a: a second generation reuses the cache and repeats the text" model)
             (and (> (assq-ref r2 'n_reused) 0) (equal? (assq-ref r2 'text) want)) r2))
    (session-free! s)
    (model-free! m)))

(define (bytevector-concat . bvs)
  (let ((out (make-bytevector (apply + (map bytevector-length bvs)))))
    (fold (lambda (bv at) (bytevector-copy! bv 0 out at (bytevector-length bv)) (+ at (bytevector-length bv)))
          0 bvs)
    out))

(check-greedy llama-f32 "In the beginning" 24)
(check-greedy embedded "In the beginning God created" 32)

;; String mode gives the same text decoded.
(let* ((m (model-load embedded)) (s (session-create m #:n-threads 2)) (smp (make-sampler m #:temp 0))
       (r (generate s smp "In the beginning God created" #:n-predict 32)))
  (check "string mode: the text is sb run's, decoded"
         (equal? (string->utf8 (assq-ref r 'text)) (sb-run-greedy embedded "In the beginning God created" 32))
         (assq-ref r 'text))
  ;; from token ids: the same as from the text
  (let ((r2 (generate (session-create m #:n-threads 2) (make-sampler m #:temp 0)
                      (tokenize m "In the beginning God created") #:n-predict 32)))
    (check "a prompt of token ids generates what its text does" (equal? (assq-ref r2 'text) (assq-ref r 'text)) r2)))

;;; ---- 4. cancelling from the callback; exceptions in the callback ----

(let* ((m (model-load embedded)) (s (session-create m #:n-threads 2)) (smp (make-sampler m #:temp 0))
       (calls 0)
       (r (generate s smp "In the beginning" #:n-predict 64
                    #:on-text (lambda (text token) (set! calls (+ calls 1)) (< calls 3)))))
  (check "returning #f cancels: the callback ran 3 times, stop is cancelled"
         (and (= calls 3) (eq? (assq-ref r 'stop) 'cancelled)) calls r)
  (check "a cancelled generation stops early" (< 0 (assq-ref r 'n_generated) 64) r)
  (let-values (((n-cached n-ctx) (session-state s)))
    (check "a cancelled generation evaluated no more than it generated"
           (<= n-cached (+ (assq-ref r 'n_prompt) (assq-ref r 'n_generated))) n-cached r))
  (let* ((calls 0)
         (e (raised (lambda ()
                      (generate s smp "In the beginning" #:n-predict 64
                                #:on-text (lambda (text token)
                                            (set! calls (+ calls 1))
                                            (when (= calls 2) (raise-exception 'boom-from-callback))
                                            #t))))))
    (check "an exception in the callback stops generation and is re-raised as is"
           (and (eq? e 'boom-from-callback) (= calls 2)) e calls))
  (let ((r (generate s smp "In the beginning" #:n-predict 4)))
    (check "the session still generates after a cancel and an exception" (= (assq-ref r 'n_generated) 4) r))
  (session-free! s))

;;; ---- 5. errors are Scheme exceptions with the status and the message ----

(let ((e (raised (lambda () (model-load "/nonexistent/dir/model.gguf")))))
  (check "a bad path raises &sonicboom-error SB_ERR_IO naming the path"
         (and (sonicboom-error? e) (eq? (sonicboom-error-status e) 'SB_ERR_IO) (= (sonicboom-error-code e) 2)
              (string-contains (sonicboom-error-detail e) "/nonexistent/dir/model.gguf")
              (string-contains (sonicboom-error-detail e) "No such file or directory")
              (string=? (exception-message e) (string-append "SB_ERR_IO: " (sonicboom-error-detail e)))
              (eq? (exception-origin e) 'model-load))
         e))
(let ((e (raised (lambda () (model-load (string-append data "/vocab/ggml-vocab-qwen2.gguf.inp"))))))
  (check "a file that is not GGUF: a status of the SB_ERR_FORMAT family"
         (and (sonicboom-error? e) (eq? (sonicboom-error-family e) 'SB_ERR_FORMAT)
              (string-prefix? "SB_ERR_FORMAT" (symbol->string (sonicboom-error-status e))))
         e))
(let ((e (raised (lambda () (model-load "model\x00.gguf")))))
  (check "a NUL in a path is refused, not truncated"
         (status-is? e 'SB_ERR_INVALID_ARG) e))
(let* ((m (model-load llama-f32))
       (e (raised (lambda () (session-create m #:n-threads -1)))))
  (check "a bad session parameter: SB_ERR_INVALID_ARG from the library with its text"
         (and (sonicboom-error? e) (eq? (sonicboom-error-status e) 'SB_ERR_INVALID_ARG)
              (positive? (string-length (sonicboom-error-detail e))))
         e)
  (let ((e (raised (lambda () (make-sampler m #:temp +nan.0)))))
    (check "a NaN temperature: SB_ERR_INVALID_ARG" (status-is? e 'SB_ERR_INVALID_ARG) e))
  (let ((e (raised (lambda () (detokenize m '(0 1 99999))))))
    (check "detokenizing an id out of range: SB_ERR_RANGE" (status-is? e 'SB_ERR_RANGE) e))
  (let* ((s (session-create m #:n-threads 2))
         (e (raised (lambda () (model-free! m)))))
    (check "freeing a model with an open session is refused" (and (sonicboom-error? e) (model-info m)) e)
    (session-free! s)
    (model-free! m)
    (let ((e (raised (lambda () (model-info m)))))
      (check "a freed model: SB_ERR_INVALID_ARG \"the model was freed\""
             (and (sonicboom-error? e) (string-contains (sonicboom-error-detail e) "was freed")) e))
    (let ((e (raised (lambda () (generate s (make-sampler 512) "x")))))
      (check "a freed session: SB_ERR_INVALID_ARG" (status-is? e 'SB_ERR_INVALID_ARG) e))))

;; A session and sampler that only the call holds stay alive while it runs, though the callback
;; collects garbage (and with it the guardian frees unreachable handles) on every piece.
(let* ((m (model-load embedded))
       (r (generate (session-create m #:n-threads 2) (make-sampler m #:temp 0) "In the beginning God created"
                    #:n-predict 32 #:on-text (lambda (text token) (gc) #t))))
  (check "a temporary session survives collections during generate"
         (equal? (string->utf8 (assq-ref r 'text)) (sb-run-greedy embedded "In the beginning God created" 32)) r))

;; Handles dropped without *-free! are freed by the collector, sessions before their model.
(let loop ((i 0))
  (when (< i 20)
    (let* ((m (model-load llama-f32)) (s (session-create m #:n-threads 1)))
      (session-prefill! s (tokenize m "hello"))
      (loop (+ i 1)))))
(gc) (gc)
(check "20 models and sessions left to the collector" #t)

;;; ---- 6. tokenize / detokenize: llama.cpp's vectors and exact round trips ----

(define sep "\n__ggml_vocab_test__\n")
(define (split-on text sep)
  (let loop ((start 0) (acc '()))
    (let ((at (string-contains text sep start)))
      (if at
          (loop (+ at (string-length sep)) (cons (substring text start at) acc))
          (reverse (if (< start (string-length text)) (cons (substring text start) acc) acc))))))

(for-each
 (lambda (name)
   (let* ((path (string-append data "/vocab/ggml-vocab-" name ".gguf"))
          (v (vocab-load path))
          (texts (split-on (utf8->string (read-file-bytes (string-append path ".inp"))) sep))
          (outs (string-split (utf8->string (read-file-bytes (string-append path ".out"))) #\newline))
          (bad-ids 0) (bad-rt 0))
     (for-each (lambda (text out)
                 (let ((ids (tokenize v text #:add-special? #f))
                       (want (map string->number (string-tokenize out))))
                   (unless (equal? ids want)
                     (set! bad-ids (+ bad-ids 1))
                     (format #t "  ~a ~s: want ~s got ~s\n" name text want ids))
                   (unless (equal? (detokenize v ids #:no-clean-spaces? #t) text)
                     (set! bad-rt (+ bad-rt 1))
                     (format #t "  ~a ~s: round trip ~s\n" name text (detokenize v ids #:no-clean-spaces? #t)))))
               texts (list-head outs (length texts)))
     (check (format #f "vocab ~a: ~a vectors tokenize as llama.cpp" name (length texts))
            (and (>= (length texts) 46) (= bad-ids 0)) bad-ids)
     (check (format #f "vocab ~a: detokenize(tokenize(text)) = text" name) (= bad-rt 0) bad-rt)
     (vocab-free! v)))
 '("qwen2" "llama-spm" "llama-bpe" "gpt-2"))

(let* ((v (vocab-load (string-append data "/vocab/ggml-vocab-qwen2.gguf")))
       (text "Grüße, 世界! <|im_end|>\n\ttabs  and  spaces")
       (ids (tokenize v text)))
  (check "a long text round-trips (the buffer grows)"
         (let ((long (string-join (make-list 200 text) " ")))
           (equal? (detokenize v (tokenize v long) #:no-clean-spaces? #t) long)))
  (check "control-token text is plain text unless parse-special?"
         (not (equal? (tokenize v text #:parse-special? #t) ids)))
  (check "a bytevector tokenizes like its string" (equal? (tokenize v (string->utf8 text)) ids))
  (check "detokenize #:bytes? gives the UTF-8 bytes"
         (equal? (detokenize v ids #:no-clean-spaces? #t #:bytes? #t) (string->utf8 text)))
  (check "token-piece of each id concatenates to the text"
         (equal? (string-concatenate (map (lambda (t) (token-piece v t)) ids)) text))
  (check "vocab facts" (and (= (vocab-n-tokens v) 151936) (not (vocab-adds-bos? v))
                            (integer? (vocab-special v 'eos)) (token-eog? v (vocab-special v 'eos)))
         (vocab-n-tokens v) (vocab-special v 'eos)))

;;; ---- 7. chat rendering equals the C API's ----

(define chats
  '(((user . "Hello"))
    ((system . "Be brief.") (user . "Grüße, 世界!\nTwo lines"))
    ((system . "S") (user . "Q1") (assistant . "A1") (user . "Q2 <|im_start|>"))))

(for-each
 (lambda (file)
   (let ((v (vocab-load file)))
     (for-each
      (lambda (msgs)
        (let-values (((st out err) (apply run-program probe "chat" file
                                          (append-map (lambda (m) (list (symbol->string (car m)) (cdr m))) msgs))))
          (let ((mine (chat-render v msgs #:bytes? #t)))
            (check (format #f "~a (~a): chat-render equals sb_chat_render from C for ~s"
                           (basename file) (vocab-chat-format v) (map car msgs))
                   (and (= st 0) (> (bytevector-length out) 0) (equal? mine out))
                   (utf8->string mine) (utf8->string out) err)
            (check (format #f "~a: the string form decodes the same bytes" (basename file))
                   (equal? (string->utf8 (chat-render v msgs)) out)))))
      chats)
     ;; sb_chat_tokenize agrees with tokenizing the rendering (content without special-token text)
     (let ((msgs (cadr chats)))
       (check (format #f "~a: chat-tokenize = tokenize(chat-render, special)" (basename file))
              (equal? (chat-tokenize v msgs) (tokenize v (chat-render v msgs) #:add-special? #t #:parse-special? #t))))
     (vocab-free! v)))
 (list (string-append data "/vocab/ggml-vocab-qwen2.gguf")
       (string-append data "/vocab/ggml-vocab-llama-bpe.gguf")
       (string-append data "/vocab/ggml-vocab-gemma-4.gguf")
       embedded))

(let* ((v (vocab-load (string-append data "/vocab/ggml-vocab-qwen2.gguf"))))
  (check "qwen2 renders ChatML"
         (equal? (chat-render v '((user . "Hi")))
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
         (chat-render v '((user . "Hi"))))
  (check "no generation prompt when asked"
         (equal? (chat-render v '((user . "Hi")) #:add-generation-prompt? #f) "<|im_start|>user\nHi<|im_end|>\n"))
  (let ((e (raised (lambda () (chat-render v '((wizard . "Hi")))))))
    (check "an unknown role: SB_ERR_INVALID_ARG from the library"
           (status-is? e 'SB_ERR_INVALID_ARG) e))
  (let ((e (raised (lambda () (chat-render v '((user . "a\x00b")))))))
    (check "a NUL in message content is refused, not truncated"
           (and (sonicboom-error? e) (string-contains (sonicboom-error-detail e) "message 0 content")) e)))

;;; ---- 8. model info, sessions, sampling by hand ----

(let* ((m (model-load llama-f32 #:check-tensors? #t))
       (info (model-info m))
       (progress-calls 0)
       (m2 (model-load llama-f32 #:progress (lambda (done total what) (set! progress-calls (+ 1 progress-calls)) #t)))
       (e (raised (lambda () (model-load llama-f32 #:progress (lambda (done total what) #f))))))
  (check "model info" (and (equal? (assq-ref info 'arch) "llama") (= (assq-ref info 'n_vocab) 512)
                           (= (assq-ref info 'n_layer) 2) (> (assq-ref info 'n_params) 0))
         info)
  (check "the progress callback runs while loading" (> progress-calls 0) progress-calls)
  (check "a progress callback returning #f cancels the load: SB_ERR_CANCELLED"
         (and (sonicboom-error? e) (eq? (sonicboom-error-status e) 'SB_ERR_CANCELLED)) e)
  (model-free! m2)
  (let* ((s (session-create m #:n-threads 2 #:n-ctx 64 #:kv-type 'f16))
         (smp (make-sampler m #:temp 0))
         (ids (tokenize m "In the beginning")))
    (check "prefill reuses nothing the first time" (= 0 (session-prefill! s ids)))
    (let* ((logits (session-logits s))
           (tok (sampler-sample smp logits))
           (argmax (car (fold (lambda (i best) (let ((x (bytevector-ieee-single-native-ref logits (* 4 i))))
                                                 (if (> x (cdr best)) (cons i x) best)))
                              (cons -1 -inf.0) (iota 512)))))
      (check "greedy sampling picks the largest logit" (= tok argmax) tok argmax)
      (session-decode! s tok)
      (let-values (((n-cached n-ctx) (session-state s)))
        (check "state counts the prompt and the decoded token" (and (= n-cached (+ 1 (length ids))) (= n-ctx 64))
               n-cached n-ctx))
      (session-truncate! s 2)
      (check "truncate" (= 2 (call-with-values (lambda () (session-state s)) (lambda (a b) a))))
      (check "session device and stats" (and (eq? (session-device s) 'cpu)
                                             (= (assq-ref (session-stats s) 'n_decode_tokens) 1))
             (session-stats s)))
    (let ((e (raised (lambda () (generate s smp "x" #:n-predict 1 #:stop '("a\x00"))))))
      (check "a NUL in a stop string is refused" (sonicboom-error? e) e))
    (let* ((r (generate s (make-sampler m #:temp 0) "In the beginning" #:n-predict 100 #:ignore-eos? #t)))
      (check "the context fills: stop context" (eq? (assq-ref r 'stop) 'context) r))
    (session-free! s))
  (model-free! m))

(check "backend info" (member (assq-ref (backend-info) 'cpu_isa) '("avx512" "avx2" "scalar")) (backend-info))

(finish)
