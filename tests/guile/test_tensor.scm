;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; tests/guile/test_tensor.scm — (sonicboom tensor), (sonicboom graph) and (sonicboom llama):
;;;   guile -L bindings/guile tests/guile/test_tensor.scm DATA
;;; (run through tests/guile/run.sh). Eager ops against Scheme references; errors naming the op
;;; and the shapes; a traced procedure equal to the same procedure run eagerly, compiled once per
;;; signature, with dead values gone from its plan; the llama decoder of (sonicboom llama) traced
;;; and eager against the C builder's logits (sb_session_eval_all) on the llama and qwen2 F32 test
;;; models, prefill and a decode step, with the speed of both; a data-dependent early exit traced
;;; into two guarded graphs; a loop whose trip count depends on data, one guarded graph per count.
;;; Prints one FAIL line per failed check and "N passed, N failed".
(use-modules (sonicboom)
             (sonicboom tensor)
             (sonicboom graph)
             (sonicboom llama)
             (rnrs bytevectors)
             (ice-9 format)
             (ice-9 exceptions)
             (srfi srfi-1)
             (srfi srfi-11))

(define data (cadr (command-line)))
(define (model-path name) (string-append data "/models/test-" name ".gguf"))

(include "harness.scm")
(define (error-is? e status words)
  (and (sonicboom-error? e) (eq? (sonicboom-error-status e) status)
       (string-contains (sonicboom-error-detail e) words)))

(define (close? a b tol) (and (= (length a) (length b)) (every (lambda (x y) (<= (abs (- x y)) (* tol (+ 1 (abs y))))) a b)))
;; medians of ROUNDS interleaved timings of f and g (n calls each, order alternating): (values tf tg)
(define (paired f g n rounds)
  (define (median l) (list-ref (sort l <) (quotient (length l) 2)))
  (let loop ((i 0) (fs '()) (gs '()))
    (if (= i rounds)
        (values (median fs) (median gs))
        (let* ((first (if (even? i) f g)) (t1 (seconds first n)) (t2 (seconds (if (even? i) g f) n)))
          (if (even? i) (loop (+ i 1) (cons t1 fs) (cons t2 gs)) (loop (+ i 1) (cons t2 fs) (cons t1 gs)))))))
(define (seconds thunk n)
  (let ((t0 (get-internal-real-time)))
    (do ((i 0 (+ i 1))) ((= i n)) (thunk))
    (/ (exact->inexact (- (get-internal-real-time) t0)) internal-time-units-per-second n)))

;;; ---- 1. eager ops ----

(define xs '(0.5 -1.25 2.0 0.0 3.5 -0.75))
(define x (tensor xs #:shape '(3 2)))
(check "tensor shape and type" (and (equal? (tensor-shape x) '(3 2)) (eq? (tensor-type x) 'f32)))
;; a new tensor's shape and type as created, without asking the library: the same as it would say
(let ((n (tensor '(1 2 3 4) #:shape '(2 2 1) #:type 'i32)) (tk (tokens '(7 8))))
  (check "tensor shape and type as created (trailing dims kept)"
         (and (equal? (tensor-shape n) '(2 2 1)) (eq? (tensor-type n) 'i32) (equal? (tensor-shape tk) '(2)) (eq? (tensor-type tk) 'i32)
              (equal? (tensor->list n) '(1.0 2.0 3.0 4.0)))
         (tensor-shape n) (tensor-type n)))
(check "tensor round trip" (close? (tensor->list x) xs 0))
(check "silu" (close? (tensor->list (silu x)) (map (lambda (v) (/ v (+ 1 (exp (- v))))) xs) 1e-6))
(check "softmax per row"
       (close? (tensor->list (softmax x))
               (append-map (lambda (row) (let* ((m (apply max row)) (e (map (lambda (v) (exp (- v m))) row)) (s (apply + e)))
                                           (map (lambda (v) (/ v s)) e)))
                           (list (list-head xs 3) (list-tail xs 3)))
               1e-6))
(let* ((w (tensor '(1 2 3 4 5 6) #:shape '(3 2)))           ; W [K=3, N=2]: rows of 3
       (y (linear x w (tensor '(10 20) #:shape '(2)))))
  (check "linear = x W^T + b" (close? (tensor->list y)
                                      (list (+ 10 (* 0.5 1) (* -1.25 2) (* 2 3)) (+ 20 (* 0.5 4) (* -1.25 5) (* 2 6))
                                            (+ 10 (* 0 1) (* 3.5 2) (* -0.75 3)) (+ 20 (* 0 4) (* 3.5 5) (* -0.75 6)))
                                      1e-6)
         (tensor->list y)))
(check "reshape is a view" (let ((r (reshape x '(6)))) (and (tensor-view? r) (equal? (tensor-shape r) '(6)))))
(check "embedding picks rows" (close? (tensor->list (embedding (tokens '(1 0)) x)) (append (list-tail xs 3) (list-head xs 3)) 0))
(check "op names include torch's" (and (member "linear" (op-names)) (member "softmax" (op-names))))
(check "shape mismatch names the op and shapes"
       (error-is? (raised (lambda () (add x (tensor '(1 2) #:shape '(2))))) 'SB_ERR_INVALID_ARG "add(f32[3,2], f32[2])"))
(check "a token outside the embedding"
       (error-is? (raised (lambda () (embedding (tokens '(2)) x))) 'SB_ERR_RANGE "token 2"))
(check "tensor-test eager" (and (tensor-test (lambda (v) (> (apply max v) 3)) x)
                                (not (tensor-test (lambda (v) (> (apply max v) 4)) x))))

;;; ---- 1b. layer-norm, gelu, concat, permute / transpose: eager against Scheme, then traced ----

(define (erf z)                          ; Maclaurin series: enough terms for |z| < 4 in doubles
  (let loop ((n 0) (term z) (sum 0))
    (if (> n 80) (* sum (/ 2 (sqrt 3.141592653589793)))
        (loop (+ n 1) (* term (- (* z z)) (/ 1 (+ n 1))) (+ sum (/ term (+ (* 2 n) 1)))))))
(define (rows-of l n) (if (null? l) '() (cons (list-head l n) (rows-of (list-tail l n) n))))
(define (layer-norm-ref l n w b eps)
  (append-map (lambda (row)
                (let* ((m (/ (apply + row) n)) (v (/ (apply + (map (lambda (x) (* (- x m) (- x m))) row)) n)))
                  (map (lambda (x wi bi) (+ bi (* wi (/ (- x m) (sqrt (+ v eps)))))) row w b)))
              (rows-of l n)))
(define w3 (tensor '(1.5 -0.5 2.0) #:shape '(3)))
(define b3 (tensor '(0.25 0.0 -1.0) #:shape '(3)))
(check "layer-norm (weight, bias) = torch's" (close? (tensor->list (layer-norm x w3 b3))
                                                     (layer-norm-ref xs 3 '(1.5 -0.5 2.0) '(0.25 0.0 -1.0) 1e-5) 1e-5)
       (tensor->list (layer-norm x w3 b3)))
(check "layer-norm (no weight, eps 0.5)" (close? (tensor->list (layer-norm x #:eps 0.5)) (layer-norm-ref xs 3 '(1 1 1) '(0 0 0) 0.5) 1e-5))
(check "gelu is exact (erf)" (close? (tensor->list (gelu x)) (map (lambda (v) (* 0.5 v (+ 1 (erf (/ v (sqrt 2)))))) xs) 1e-6)
       (tensor->list (gelu x)))
(check "gelu #:approximate 'tanh is gelu-tanh" (close? (tensor->list (gelu x #:approximate 'tanh)) (tensor->list (gelu-tanh x)) 0))
(let ((y (tensor '(7 8 9) #:shape '(3 1)))
      (z (tensor '(-1 -2) #:shape '(1 2))))
  (check "concat along ne[1]: rows appended" (equal? (tensor-shape (concat (list x y) 1)) '(3 3)))
  (check "concat along ne[1]: values" (close? (tensor->list (concat (list x y) 1)) (append xs '(7 8 9)) 0))
  (check "concat along ne[0]: each row extended"
         (close? (tensor->list (concat (list x z x) 0))
                 (append (list-head xs 3) '(-1) (list-head xs 3) (list-tail xs 3) '(-2) (list-tail xs 3)) 0)
         (tensor->list (concat (list x z x) 0)))
  (check "concat of mismatched shapes names the op and shapes"
         (error-is? (raised (lambda () (concat (list x z) 1))) 'SB_ERR_INVALID_ARG "concat(f32[3,2], f32[1,2])")))
(let ((xt (permute x '(1 0))))
  (check "permute (1 0) transposes" (and (equal? (tensor-shape xt) '(2 3))
                                         (close? (tensor->list xt) '(0.5 0.0 -1.25 3.5 2.0 -0.75) 0)
                                         (not (tensor-view? xt)))
         (tensor->list xt))
  (check "transpose = permute" (close? (tensor->list (transpose x 0 1)) (tensor->list xt) 0))
  (check "a permute keeping the memory order is a view" (tensor-view? (permute (tensor '(1 2 3) #:shape '(3 1)) '(1 0))))
  (check "permute: not a permutation" (error-is? (raised (lambda () (permute x '(0 0)))) 'SB_ERR_INVALID_ARG "not a permutation")))
(let* ((f (lambda (x y) (permute (concat (list (gelu (layer-norm x w3 b3)) y) 1) '(1 0))))
       (y (tensor '(1 2 3 4 5 6 7 8 9) #:shape '(3 3)))
       (traced (trace f))
       (te (tensor->list (f x y)))
       (tt (tensor->list (traced x y)))
       (text (program-text (car (traced-programs traced)))))
  (check "layer-norm, gelu, concat, permute traced = eager" (close? tt te 0) tt te)
  (check "the traced plan holds them" (every (lambda (w) (string-contains text w)) '("layer_norm(" "gelu(" "concat(" "permute(")) text))

;;; ---- 2. tracing: the same procedure, compiled; dead values dropped ----

(define w (tensor '(1.0 0.5 2.0) #:shape '(3)))
(define dead-calls 0)
(define (block x)
  (let ((h (rms-norm x w 1e-6))
        (unused (gelu-tanh (scale x 3.0))))      ; never reaches an output
    (set! dead-calls (+ dead-calls 1))
    (add (silu h) x)))
(define-model (block/traced x) (block x))
(let* ((eager (tensor->list (block x)))
       (t1 (tensor->list (block/traced x)))
       (t2 (tensor->list (block/traced x))))
  (check "traced = eager" (close? t1 eager 1e-6) t1 eager)
  (check "the trace ran once, later calls run the program" (and (close? t2 t1 0) (= dead-calls 2)) dead-calls)
  (let ((text (program-text (car (traced-programs block/traced)))))
    (check "the dead value is not in the plan" (not (string-contains text "gelu")) text)
    (check "the plan fused the live chain" (string-contains text "fused") text)))
(block/traced (tensor (iota 9) #:shape '(3 3)))
(let* ((r (trace (lambda (x) (scale x 2.0)) #:reuse-outputs? #t))
       (a (r x))
       (a-vals (tensor->list a))
       (b (r (tensor '(1 2 3 4 5 6) #:shape '(3 2))))
       (c (r b)))                                          ; b is an input now: not written over
  (check "reuse-outputs: the next call writes into the last result"
         (and (eq? a b) (close? (tensor->list b) '(2 4 6 8 10 12) 0) (close? a-vals (map (lambda (v) (* 2 v)) xs) 0)))
  (check "reuse-outputs: never over an input" (and (not (eq? c b)) (close? (tensor->list c) '(4 8 12 16 20 24) 0))))
;; a call repeating the last one (the same tensors, outputs reused) runs the program again through
;; the pointers it remembered: it must still compute, not hand back the last result. The program reads
;; a cache written eagerly in between, so a stale result shows.
(let* ((c (tensor-zeros '(2 4)))
       (x2 (tensor '(1 2 3 4 5 6 7 8) #:shape '(2 4)))
       (r (trace (lambda (x) (list (add x c) (scale x 2.0))) #:reuse-outputs? #t))
       (store! (lambda (vals p) (kv-store! c (tensor vals #:shape '(2 1)) (positions (list p)))))
       (r1 (r x2)) (r2 (r x2)) (r3 (r x2)))                     ; new, then written into, then repeated
  (check "repeat: the same result tensors, each call" (and (eq? (car r2) (car r1)) (eq? (car r3) (car r1)) (eq? (cadr r3) (cadr r1))))
  (store! '(10 20) 1)
  (let ((r4 (r x2)))
    (check "repeat: the program runs again (it sees the cache written since)"
           (and (eq? (car r4) (car r1)) (close? (tensor->list (car r4)) '(1 2 13 24 5 6 7 8) 0)) (tensor->list (car r4))))
  (let* ((x3 (tensor '(0 0 0 0 0 0 0 1) #:shape '(2 4)))
         (r5 (r x3)))                                            ; other tensors: the full call
    (check "repeat: another input tensor is a new call" (close? (tensor->list (cadr r5)) '(0 0 0 0 0 0 0 2) 0))
    (store! '(-1 -2) 3)
    (check "repeat: then that one repeats" (close? (tensor->list (car (r x3))) '(0 0 10 20 0 0 -1 -1) 0)
           (tensor->list (car (r x3))))
    (check "repeat: one graph" (= 1 (length (traced-paths r))))
    ;; an input refilled in place: the same tensors, so the repeat path, with the new values
    (tensor-write! x3 '(1 1 1 1 1 1 1 1))
    (check "tensor-write!: a repeated call sees the input's new values"
           (and (close? (tensor->list (car (r x3))) '(1 1 11 21 1 1 0 -1) 0) (eq? (car (r x3)) (car r5))) (tensor->list (car (r x3))))))
(let* ((tk (tokens '(1 2 3))) (bv (make-bytevector 12 0)) (ft (tensor '(1 2 3 4))) (view (reshape ft '(2 2))))
  (tensor-write! tk '(7 8 9))
  (tensor-write! ft '(0.5 -1 2 4))
  (check "tensor-write!: i32 values; f32 values, seen by a view"
         (and (equal? (tensor->list tk) '(7.0 8.0 9.0)) (equal? (tensor->list view) '(0.5 -1.0 2.0 4.0))))
  (bytevector-s32-native-set! bv 4 -5)
  (tensor-write! tk bv)
  (check "tensor-write!: a bytevector in the type's layout" (equal? (tensor->list tk) '(0.0 -5.0 0.0)))
  (check "tensor-write!: too few values" (raised (lambda () (tensor-write! tk '(1 2)))))
  (check "tensor-write!: a bytevector of another size names both sizes"
         (error-is? (raised (lambda () (tensor-write! tk (make-bytevector 8 0)))) 'SB_ERR_INVALID_ARG "12 bytes of data, 8 given"))
  (check "tensor-write!: a refused write changes nothing" (equal? (tensor->list tk) '(0.0 -5.0 0.0))))
(check "a new signature is a new graph" (= 2 (length (traced-paths block/traced))) (traced-paths block/traced))
(check "a traced op error names the op"
       (error-is? (raised (lambda () ((trace (lambda (x) (add x (tensor '(1 2) #:shape '(2))))) (tensor (iota 6) #:shape '(3 2)))))
                  'SB_ERR_INVALID_ARG "add(f32[3,2], f32[2])"))

;;; ---- 2b. devices: 'auto is GPU 0 where usable, else the CPU; the same values either way ----

(let* ((xa (tensor xs #:shape '(3 2) #:device 'auto))
       (dev (tensor-device xa))
       (r (trace (lambda (x) (silu (scale x 2.0))) #:device 'auto)))
  (check "tensor-device" (and (eq? (tensor-device x) 'cpu) (memq dev '(cpu cuda))) dev)
  (check "an eager op stays on its tensors' device" (eq? (tensor-device (silu xa)) dev))
  (check "traced on device auto = eager on the CPU" (close? (tensor->list (r xa)) (tensor->list (silu (scale x 2.0))) 1e-5))
  (check "an unknown device" (raised (lambda () (tensor xs #:shape '(3 2) #:device 'tpu))))
  (when (eq? dev 'cpu)
    (check "device 'cuda without a GPU is refused with the reason"
           (let ((e (raised (lambda () (tensor xs #:shape '(3 2) #:device 'cuda)))))
             (and (sonicboom-error? e) (memq (sonicboom-error-status e) '(SB_ERR_DEVICE SB_ERR_UNSUPPORTED))
                  (string-contains (sonicboom-error-detail e) "SB_DEVICE_CUDA"))))))

;;; ---- 3. the llama decoder in Scheme against the C builder ----

(define ids '(1 15 300 22 7 99 4 250 31 2))
(define T (length ids))
(for-each
 (lambda (name)
   (let* ((path (model-path name))
          (m (model-load path))
          (V (assq-ref (model-info m) 'n_vocab))
          (traced (trace (llama-decoder m path #:n-ctx 64)))
          (eager (llama-decoder m path #:n-ctx 64))
          (s (session-create m #:n-ctx 64))
          (ref (f32s (session-eval-all! s ids V)))
          (lt (tensor->list (traced (tokens ids) (positions (iota T)))))
          (le (tensor->list (eager (tokens ids) (positions (iota T))))))
     (check (string-append name ": reference logits are not trivial") (> (fold + 0 (map abs ref)) 1.0))
     (check (string-append name ": traced logits = the C builder's (NMSE <= 1e-6)")
            (and (= (length lt) (* V T)) (<= (nmse lt ref) 1e-6)) (nmse lt ref))
     (check (string-append name ": eager logits = the C builder's (NMSE <= 1e-6)")
            (and (= (length le) (* V T)) (<= (nmse le ref) 1e-6)) (nmse le ref))
     (check (string-append name ": other tokens give other logits")
            (> (nmse (tensor->list (eager (tokens (reverse ids)) (positions (iota T)))) ref) 1e-3))
     ;; a decode step reads the caches the prefill wrote
     (session-truncate! s T)
     (traced (tokens ids) (positions (iota T)))
     (session-decode! s 77)
     (let ((d (tensor->list (traced (tokens '(77)) (positions (list T)))))
           (r (f32s (session-logits s))))
       (check (string-append name ": decode step = the C builder's") (<= (nmse d r) 1e-6) (nmse d r)))
     (check (string-append name ": one graph per shape (prefill, decode)") (= 2 (length (traced-paths traced))))
     ;; speed: the same plan, timed from Scheme (prefill of 64 tokens, decode steps)
     ;; (interleaved rounds, medians; the same thread count; outputs reused as the session reuses its
     ;; logits buffer)
     (if (getenv "LD_PRELOAD")
         (format #t "~a speed: not timed in a sanitizer build\n" name)
     (let* ((ids64 (map (lambda (i) (modulo (* 37 (+ i 1)) V)) (iota 64)))
            (tok64 (tokens ids64)) (pos64 (positions (iota 64)))
            (tok1 (tokens '(5))) (pos1 (positions '(10)))
            (s64 (session-create m #:n-ctx 128 #:n-batch 64 #:n-threads 2))
            (n 10)
            (traced64 (trace (llama-decoder m path #:n-ctx 128) #:reuse-outputs? #t)))
       (traced64 tok64 pos64) (traced64 tok1 pos1)
       (session-eval-all! s64 ids64 V)
       (let-values (((tp cp) (paired (lambda () (traced64 tok64 pos64))
                                     (lambda () (session-truncate! s64 0) (session-eval-all! s64 ids64 V)) n 5))
                    ((td cd) (paired (lambda () (traced64 tok1 pos1))
                                     (lambda () (session-truncate! s64 10) (session-decode! s64 5)) (* 10 n) 5)))
         (format #t "~a speed: prefill 64: traced ~,3f ms, C builder ~,3f ms (ratio ~,3f); decode: traced ~,3f ms, C builder ~,3f ms (ratio ~,3f)\n"
                 name (* 1000 tp) (* 1000 cp) (/ tp cp) (* 1000 td) (* 1000 cd) (/ td cd)))
       (session-free! s64)))
     (session-free! s)))
 '("llama-f32" "qwen2-f32"))

;; quantized weights stay quantized: the same plan as the C builder's (quantize-once, q8 activations)
(for-each
 (lambda (name)
   (let* ((path (model-path name))
          (m (model-load path))
          (V (assq-ref (model-info m) 'n_vocab))
          (s (session-create m #:n-ctx 64))
          (ref (f32s (session-eval-all! s ids V)))
          (lt (tensor->list ((trace (llama-decoder m path #:n-ctx 64)) (tokens ids) (positions (iota T))))))
     (check (string-append name ": traced logits = the C builder's (NMSE <= 1e-6)") (<= (nmse lt ref) 1e-6) (nmse lt ref))
     (session-free! s)))
 '("llama-q4_k_m" "qwen2-q4_0" "qwen3-q8_0"))

;;; ---- 4. data-dependent control flow: early exit, two guarded graphs ----

(let* ((path (model-path "llama-f32"))
       (m (model-load path))
       (emb (weight m "token_embd.weight"))
       (norm-w (weight m "output_norm.weight"))
       (out-w (weight m "output.weight"))
       (full (llama-decoder m path #:n-ctx 16))
       (confident? #f)
       (early-exit
        (lambda (tok pos)
          ;; a cheap head on the embedding: exit when its top probability passes the threshold
          (let ((quick (linear (rms-norm (embedding tok emb) norm-w 1e-5) out-w)))
            (if (tensor-test confident? (softmax quick))
                quick
                (full tok pos))))))
  ;; a threshold between two tokens' top probabilities, so each takes one branch
  (let* ((top (lambda (t) (apply max (tensor->list (softmax (linear (rms-norm (embedding (tokens (list t)) emb) norm-w 1e-5) out-w))))))
         (pa (top 3)) (pb (top 200))
         (hi (if (> pa pb) 3 200)) (lo (if (> pa pb) 200 3))
         (thr (/ (+ pa pb) 2)))
    (set! confident? (lambda (p) (> (apply max p) thr)))
    (check "the two tokens' top probabilities differ" (not (= pa pb)) pa pb)
    (let* ((traced (trace early-exit))
           (eager-hi (tensor->list (early-exit (tokens (list hi)) (positions '(0)))))
           (eager-lo (tensor->list (early-exit (tokens (list lo)) (positions '(0)))))
           (got-hi (tensor->list (traced (tokens (list hi)) (positions '(0)))))
           (got-lo (tensor->list (traced (tokens (list lo)) (positions '(0)))))
           (again-hi (tensor->list (traced (tokens (list hi)) (positions '(0))))))
      (check "early exit: the confident token exits, its logits as eager" (close? got-hi eager-hi 1e-6))
      (check "the other token runs the whole model, as eager" (close? got-lo eager-lo 1e-6))
      (check "switching back reuses the first graph" (close? again-hi eager-hi 1e-6))
      (let ((paths (traced-paths traced)))
        (check "two guarded graphs, one per branch" (and (= 2 (length paths))
                                                           (lset= equal? (map cadr paths) '((#t) (#f))))
               paths))
      (let ((lines (map (lambda (p) (length (filter (lambda (l) (string-contains l "matmul"))
                                                    (string-split (program-text p) #\newline))))
                        (traced-programs traced))))
        (check "the exit graph computes no decoder layer" (and (= 2 (length lines)) (= 1 (apply min lines))
                                                                 (> (apply max lines) 10))
               lines)))))

;;; ---- 5. a loop whose trip count depends on data: one guarded graph per count ----

(let* ((iterations 0)
       (halve-until-small                       ; halve x until every |value| <= 1
        (lambda (x)
          (let loop ((x x) (n 0))
            (set! iterations n)
            (if (tensor-test (lambda (v) (> (apply max (map abs v)) 1.0)) x)
                (loop (scale x 0.5) (+ n 1))
                x))))
       (traced (trace halve-until-small))
       (inputs (list (tensor '(3.5 -0.5) #:shape '(2))      ; 2 halvings
                     (tensor '(0.5 0.25) #:shape '(2))      ; none
                     (tensor '(-7.0 1.0) #:shape '(2))      ; 3: shares its first two decisions with the first
                     (tensor '(3.0 0.0) #:shape '(2)))))    ; 2 again: the first graph, no new trace
  (for-each (lambda (x)
              (let* ((e (tensor->list (halve-until-small x))) (t (tensor->list (traced x))))
                (check "data-dependent loop: traced = eager" (close? t e 0) t e)))
            inputs)
  (let ((paths (map cadr (traced-paths traced))))
    (check "one graph per trip count, each with its guards"
           (lset= equal? paths '((#t #t #f) (#f) (#t #t #t #f))) paths))
  (check "the eager loop ran the count the data asked for" (begin (halve-until-small (tensor '(9.0) #:shape '(1))) (= iterations 4))
         iterations))

(finish)
