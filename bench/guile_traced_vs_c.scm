;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; bench/guile_traced_vs_c.scm — the traced Scheme decoder ((sonicboom llama) through (sonicboom
;;; graph)) against the built-in C builder on the same file, both driven from Scheme:
;;;   GUILE_SONICBOOM_LIB=build/libsonicboom.so guile -L bindings/guile bench/guile_traced_vs_c.scm \
;;;       MODEL.gguf [--device cpu|cuda] [--threads N] [--prefill T] [--rounds R] [--decode-steps S]
;;;       [--logits page-locked|ordinary] [--only traced|c] [--iters K]
;;; Timing (default): R rounds, each timing one prefill of T tokens (logits for every token: the
;;; traced model's [V, T] against sb_session_eval_all) and S decode steps at position T (one token,
;;; [V, 1] against the C decode step below), traced and C alternating which goes first. Both sides
;;; write into buffers allocated once (#:reuse-outputs? / one logits bytevector), use N threads and
;;; an f32 KV cache of 2T positions; each side's inputs are made once (the traced side's token and
;;; position tensors, the C side's token ids), so a traced call repeats the last one (graph.scm's
;;; repeat path: one foreign call). Prints the best and the median per call, their ratio traced / C, by
;;; the wall clock and by the process's CPU time (which, with --threads 1, leaves out the time other
;;; processes held the core), and the load average before and after.
;;; --device cuda: the C session (session-create #:device 'cuda), the traced programs (trace
;;; #:device 'cuda) and the Scheme decoder's KV caches (llama-decoder #:device 'cuda) all on GPU 0;
;;; without a usable GPU the script stops at once with the reason (exit 1). Each side's first
;;; prefill and decode run twice before timing: a CUDA prefill plan is captured as a CUDA Graph on
;;; its second run, a decode plan on its first.
;;; What a timed CUDA call waits for, on both sides: the library's CUDA executor (exec_cuda_run)
;;; launches the plan, copies the logits output into host memory and synchronises its stream
;;; before the call returns, for a session (sb_session_eval_all, sb_session_decode) and for a
;;; program (sb_program_run: "programs' outputs are copied back to the host with each run") alike.
;;; So every timed call ends with the GPU work done and the logits in host memory, readable with no
;;; further copy: the C prefill's in the eval_all bytevector, the C decode's in the session's own
;;; buffer (sb_session_get_logits borrows it) or the bytevector, the traced calls' in their output tensors' host
;;; memory (tensor->f32vector would only copy them again, on the host, so neither side reads them).
;;; Where the logits land decides what a CUDA call costs beyond the plan: page-locked host memory is
;;; written by the vocabulary matmul directly (the executor's direct outputs), ordinary memory gets
;;; a device-to-host copy (about 50-60 us for 600 KB of logits on an H100). --logits picks it for
;;; both sides alike:
;;;  - page-locked (default): the traced results are page-locked (trace #:page-locked-outputs? #t:
;;;    sb_compile_params.page_locked_outputs), the C decode step is sb_session_decode into the
;;;    session's own page-locked buffer. The C prefill has no page-locked destination in the public
;;;    API (sb_session_eval_all writes the caller's memory, a bytevector here): its row is not like
;;;    with like in this mode (the traced prefill saves the copy).
;;;  - ordinary: the traced results are ordinary host memory (#:page-locked-outputs? #f), the C
;;;    prefill and decode step are sb_session_eval_all into the bytevector (the decode step: one
;;;    token; the session then also copies that row into its own buffer).
;;; On the CPU both modes write ordinary memory and run the same plans; only the C decode step's
;;; entry point differs (sb_session_decode or sb_session_eval_all).
;;; What still differs in every mode, by design of the two APIs (at the C builder's cost): the C
;;; session scans every logit it returns for NaN/Inf (session.c check_logits) and fstat()s the model
;;; file each call; a program does neither.
;;; On CUDA a prefill with every token's logits moves T x V floats to the host on both sides (and the
;;; C side scans them): keep T small there (e.g. 16..64) for the GPU work to dominate.
;;; --only traced|c --iters K: set both up, then run only that side K times (prefill then S decode
;;; steps each): for instruction counts under callgrind (bench/guile_traced_vs_c.sh), where the
;;; difference of two K gives the cost per call without the setup.
;;; Plans: with SB_DUMP_IR=after:fuse_rope_store,memplan the library prints every plan it builds to
;;; stderr (on either device: the CUDA target's plans with --device cuda); this script prints
;;; "=== plan: <side> <phase>" before each first call so that bench/plan_diff.py can compare the
;;; traced plans with the C builder's.
(use-modules (sonicboom)
             (sonicboom tensor)
             (sonicboom graph)
             (sonicboom llama)
             (system foreign)
             (rnrs bytevectors)
             (ice-9 format)
             (srfi srfi-1))

(define args (cdr (command-line)))
(define (opt name default)
  (let ((m (member name args))) (if (and m (pair? (cdr m))) (cadr m) default)))
(define (usage-error fmt . xs)
  (apply format (current-error-port) fmt xs)
  (display "usage: guile_traced_vs_c.scm MODEL.gguf [--device cpu|cuda] [--threads N] [--prefill T] [--rounds R] [--decode-steps S] [--logits page-locked|ordinary] [--only traced|c] [--iters K]\n" (current-error-port))
  (exit 2))
(define path (if (and (pair? args) (not (string-prefix? "--" (car args)))) (car args) (usage-error "")))
(define (number-opt name default)
  (let ((n (string->number (opt name default))))
    (if (and n (exact-integer? n) (>= n 0)) n (usage-error "error: ~a ~a: expected a count\n" name (opt name default)))))
(define (choice-opt name choices)
  (let ((x (string->symbol (opt name (symbol->string (car choices))))))
    (if (memq x choices) x (usage-error "error: ~a ~a: expected one of ~a\n" name x choices))))
(define device (choice-opt "--device" '(cpu cuda)))
(define threads (number-opt "--threads" "2"))
(define T (number-opt "--prefill" "32"))
(define rounds (number-opt "--rounds" "7"))
(define steps (number-opt "--decode-steps" "8"))
(define logits-mode (choice-opt "--logits" '(page-locked ordinary)))
(define only (opt "--only" #f))
(define iters (number-opt "--iters" "0"))
(when (< T 1) (usage-error "error: --prefill ~a: at least one token\n" T))

;; --device cuda needs a usable GPU: say why not before loading anything
(when (eq? device 'cuda)
  (let ((info (backend-info)))
    (cond ((zero? (assq-ref info 'cuda_compiled))
           (format (current-error-port) "error: --device cuda: ~a was built without CUDA\n" sonicboom-library-path)
           (exit 1))
          ((zero? (assq-ref info 'cuda_devices))
           (format (current-error-port) "error: --device cuda: no usable GPU (~a)\n" (assq-ref info 'cuda_error))
           (exit 1)))))

(define (loadavg) (call-with-input-file "/proc/loadavg" (lambda (p) (read-line* p))))
(define (read-line* p) (let loop ((acc '())) (let ((c (read-char p))) (if (or (eof-object? c) (char=? c #\newline)) (list->string (reverse acc)) (loop (cons c acc))))))
(define (mark what) (format (current-error-port) "=== plan: ~a\n" what) (force-output (current-error-port)))

;; a library error ends the run with its status and text on one line (exit 1), not a backtrace
(define (or-stop thunk)
  (with-exception-handler
    (lambda (e)
      (format (current-error-port) "error: ~a: ~a\n" (sonicboom-error-status e) (sonicboom-error-detail e))
      (exit 1))
    thunk
    #:unwind? #t
    #:unwind-for-type &sonicboom-error))

;;; the C builder through the public API, with one logits buffer reused (as a session reuses its own)
(define sb-session-eval-all (%lib-fn "sb_session_eval_all" int (list '* '* size_t '*)))
(define sb-session-decode (%lib-fn "sb_session_decode" int (list '* int32)))
(define sb-session-truncate (%lib-fn "sb_session_truncate" int (list '* int64)))
(define session-ptr (@@ (sonicboom) session-ptr))

(define m (or-stop (lambda () (model-load path))))
(define V (assq-ref (model-info m) 'n_vocab))
(define ids (map (lambda (i) (modulo (* 37 (+ i 1)) V)) (iota T)))
(define idv (let ((bv (make-bytevector (* 4 T)))) (for-each (lambda (x i) (bytevector-s32-native-set! bv (* 4 i) x)) ids (iota T)) bv))
(define logits (make-bytevector (* 4 V T) 0))
(define tok5 (let ((bv (make-bytevector 4))) (bytevector-s32-native-set! bv 0 5) bv))

(define s (or-stop (lambda () (session-create m #:n-ctx (* 2 T) #:n-batch T #:n-threads threads #:kv-type 'f32 #:device device))))
(define sp (session-ptr s))
(define (c-prefill)
  (%check 'truncate (sb-session-truncate sp 0))
  (%check 'eval-all (sb-session-eval-all sp (bytevector->pointer idv) T (bytevector->pointer logits))))
;; the decode step: into the session's own (page-locked on CUDA) logits buffer, or (--logits
;; ordinary) into the first row of the bytevector, as a program writes an ordinary output tensor
(define c-decode
  (if (eq? logits-mode 'page-locked)
      (lambda ()
        (%check 'truncate (sb-session-truncate sp T))
        (%check 'decode (sb-session-decode sp 5)))
      (lambda ()
        (%check 'truncate (sb-session-truncate sp T))
        (%check 'eval-all (sb-session-eval-all sp (bytevector->pointer tok5) 1 (bytevector->pointer logits))))))

;;; the Scheme decoder, traced and compiled with the same thread count, for the same device
(define forward (or-stop (lambda () (llama-decoder m path #:n-ctx (* 2 T) #:device device))))
(define traced (trace forward #:reuse-outputs? #t #:threads threads #:device device
                      #:page-locked-outputs? (eq? logits-mode 'page-locked)))
(define tok-T (tokens ids))
(define pos-T (positions (iota T)))
(define tok-1 (tokens '(5)))
(define pos-1 (positions (list T)))
(define (traced-prefill) (traced tok-T pos-T))
(define (traced-decode) (traced tok-1 pos-1))

;; first calls: plans built (and printed under SB_DUMP_IR), outputs allocated, caches warm; on
;; CUDA a second prefill and decode each, so that both sides' CUDA Graphs are captured before timing
(or-stop
 (lambda ()
   (mark "c prefill") (c-prefill)
   (mark "traced prefill") (traced-prefill)
   (mark "c decode") (c-decode)
   (mark "traced decode") (traced-decode)
   (mark "end")
   (when (eq? device 'cuda)
     (c-prefill) (traced-prefill) (c-decode) (traced-decode))))

;; (wall . cpu) seconds per call of n calls: wall clock, and the process's CPU time (all threads; with
;; --threads 1 the time the work itself took, whatever else the machine ran meanwhile)
(define (time-of thunk n)
  (let ((w0 (get-internal-real-time)) (c0 (get-internal-run-time)))
    (do ((i 0 (+ i 1))) ((= i n)) (thunk))
    (cons (/ (exact->inexact (- (get-internal-real-time) w0)) internal-time-units-per-second n)
          (/ (exact->inexact (- (get-internal-run-time) c0)) internal-time-units-per-second n))))
(define (median l) (let ((v (sort l <)) (k (length l))) (if (odd? k) (list-ref v (quotient k 2)) (/ (+ (list-ref v (- (quotient k 2) 1)) (list-ref v (quotient k 2))) 2))))

(cond
 (only
  (let ((prefill (if (string=? only "c") c-prefill traced-prefill))
        (decode (if (string=? only "c") c-decode traced-decode)))
    (do ((i 0 (+ i 1))) ((= i iters))
      (prefill)
      (do ((k 0 (+ k 1))) ((= k steps)) (decode)))
    (format #t "ran ~a: ~a x (prefill ~a + ~a decode steps)\n" only iters T steps)))
 (else
  (format #t "model ~a: n_vocab ~a, device ~a~a, ~a threads, prefill ~a tokens, ~a decode steps a round, ~a rounds, logits ~a\n"
          path V device (if (eq? device 'cuda) (format #f " (~a)" (assq-ref (backend-info) 'cuda_device_name)) "")
          threads T steps rounds
          (if (eq? logits-mode 'page-locked)
              "page-locked (traced results; C decode: the session's buffer; C prefill: a bytevector)"
              "ordinary (traced results; C prefill and decode: eval_all into a bytevector)"))
  (format #t "load average before: ~a\n" (loadavg))
  (let loop ((r 0) (tp '()) (cp '()) (td '()) (cd '()))
    (if (< r rounds)
        (let* ((first-traced (even? r))
               (p1 (time-of (if first-traced traced-prefill c-prefill) 1))
               (p2 (time-of (if first-traced c-prefill traced-prefill) 1))
               (d1 (time-of (if first-traced traced-decode c-decode) steps))
               (d2 (time-of (if first-traced c-decode traced-decode) steps)))
          (format #t "round ~a: prefill traced ~,2f ms, C ~,2f ms; decode traced ~,3f ms, C ~,3f ms (wall)\n" r
                  (* 1000 (car (if first-traced p1 p2))) (* 1000 (car (if first-traced p2 p1)))
                  (* 1000 (car (if first-traced d1 d2))) (* 1000 (car (if first-traced d2 d1))))
          (if first-traced
              (loop (+ r 1) (cons p1 tp) (cons p2 cp) (cons d1 td) (cons d2 cd))
              (loop (+ r 1) (cons p2 tp) (cons p1 cp) (cons d2 td) (cons d1 cd))))
        (let ((row (lambda (what clock t c)
                     (let ((t (map clock t)) (c (map clock c)))
                       (format #t "~a (~a): traced best ~,3f ms median ~,3f ms; C best ~,3f ms median ~,3f ms; traced/C best ~,3f median ~,3f\n"
                               what (if (eq? clock car) "wall" "cpu") (* 1000 (apply min t)) (* 1000 (median t))
                               (* 1000 (apply min c)) (* 1000 (median c)) (/ (apply min t) (apply min c)) (/ (median t) (median c)))))))
          (for-each (lambda (clock)
                      (row (format #f "prefill ~a" T) clock tp cp)
                      (row "decode" clock td cd))
                    (list car cdr))
          (format #t "load average after: ~a\n" (loadavg)))))))
