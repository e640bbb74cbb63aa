;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; bindings/guile/sonicboom/graph.scm — the (sonicboom graph) module: a Scheme model procedure,
;;; the same one that runs eagerly on tensors, traced into a graph that the planner compiles (the
;;; pass pipeline and memory plan of the built-in models), over (system foreign) alone.
;;;
;;; Contract:
;;;  - (trace proc) returns a procedure taking the same tensors as PROC. Its first call with a
;;;    given signature (each argument's type, shape and role: data, tokens or pos) runs PROC on
;;;    symbolic values: every op records a node (concrete tensors PROC closes over — weights, KV
;;;    caches — are bound into the graph), PROC's result (a value or a list of values) becomes the
;;;    graph's outputs, and the graph is compiled once. Later calls only run the program.
;;;  - Only what reaches an output is computed: the planner's dead-compute elimination drops the
;;;    rest (program-text shows the planned graph).
;;;  - Data-dependent control flow: (tensor-test pred x) on a traced value X is a point where the
;;;    program depends on data. The tracer captures the continuation there (a delimited one,
;;;    abort-to-prompt), compiles and runs the graph recorded so far on the call's inputs to learn
;;;    the outcome, and resumes the continuation with it: the rest of the trace is specialised on
;;;    that outcome, and X becomes a guard output of the graph. A call runs the graph of the last
;;;    path taken and checks its guards; where a guard disagrees it continues with the graph of the
;;;    path the data took, tracing that path first if it is new. Each taken path is its own graph.
;;;  - Threads: a traced procedure is used by one thread at a time.
(define-module (sonicboom graph)
  #:use-module (sonicboom)
  #:use-module (sonicboom tensor)
  #:use-module (system foreign)
  #:use-module (system foreign-library)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 optargs)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:export (trace define-model traced-paths traced-programs program-text graph-text
            program-run))

(define keep-alive (@@ (sonicboom) keep-alive))
(define %tensor-free-wrap (@@ (sonicboom tensor) wrap))

(define sb-graph-create (%lib-fn "sb_graph_create" int '(*)))
(define sb-graph-free* (foreign-library-pointer (@@ (sonicboom) %lib) "sb_graph_free"))
(define sb-graph-input (%lib-fn "sb_graph_input" int (list '* int '* int int '* '*)))
(define sb-graph-tensor (%lib-fn "sb_graph_tensor" int (list '* int '* '*)))
(define sb-graph-op (%lib-fn "sb_graph_op" int (list '* '* '* int '* int '*)))
(define sb-graph-value-info (%lib-fn "sb_graph_value_info" int (list '* int32 '*)))
(define sb-graph-output (%lib-fn "sb_graph_output" int (list '* int32 '*)))
(define sb-graph-print (%lib-fn "sb_graph_print" int (list '* '* size_t '*)))
(define sb-graph-compile (%lib-fn "sb_graph_compile" int '(* * *)))
(define sb-program-free* (foreign-library-pointer (@@ (sonicboom) %lib) "sb_program_free"))
(define sb-program-print (%lib-fn "sb_program_print" int (list '* '* size_t '*)))
(define sb-program-run (%lib-fn "sb_program_run" int (list '* '* size_t '* size_t)))

(define SB_INPUT_DATA 0)
(define SB_INPUT_TOKENS 1)
(define SB_INPUT_POS 2)
(define SB_INPUT_CACHE 3)

(define (out-cell) (make-bytevector (sizeof '*) 0))
(define (cell-pointer bv) (dereference-pointer (bytevector->pointer bv)))

;;; ---- graphs ----

;; one trace in progress: the graph, the call's inputs, the decisions known in advance, those
;; taken so far (in order), the guard values (syms), the prompt tag
(define-record-type <tracer>
  (%make-tracer graph inputs known taken guards tag)
  tracer?
  (graph tracer-graph)
  (inputs tracer-inputs)
  (known tracer-known set-tracer-known!)
  (taken tracer-taken set-tracer-taken!)
  (guards tracer-guards set-tracer-guards!)
  (tag tracer-tag))

(define (graph-create)
  (let ((out (out-cell)))
    (%check 'trace (sb-graph-create (bytevector->pointer out)))
    (make-pointer (pointer-address (cell-pointer out)) sb-graph-free*)))

(define (value-sym tr v)
  ;; sb_tensor_info: int type, device, n_dims; int64 ne[4]; ...
  (let* ((types (list int int int int64 int64 int64 int64 uint64 int int int int int int))
         (buf (make-bytevector (sizeof types) 0)))
    (%check 'trace (sb-graph-value-info (tracer-graph tr) v (bytevector->pointer buf)))
    (let ((info (parse-c-struct (bytevector->pointer buf) types)))
      (make-sym tr v (take (list-head (cdddr info) 4) (list-ref info 2)) (%code-type (car info))))))

(define (declare-input tr t i)
  (let* ((shape (tensor-shape t))
         (ne (make-bytevector 32 0))
         (out (make-bytevector 4 0))
         (name (string->pointer (format #f "in.~a" i)))
         (kind (case (tensor-role t) ((tokens) SB_INPUT_TOKENS) ((pos) SB_INPUT_POS) (else SB_INPUT_DATA))))
    (for-each (lambda (d k) (bytevector-s64-native-set! ne (* 8 k) d)) shape (iota (length shape)))
    (%check 'trace (sb-graph-input (tracer-graph tr) kind name (%type-code (tensor-type t)) (length shape)
                                   (bytevector->pointer ne) (bytevector->pointer out)))
    (keep-alive name)
    (value-sym tr (bytevector-s32-native-ref out 0))))

;; source i of op name: a cache slot (kv_store's cache, attention's k and v) or data
(define (slot-kind name i)
  (if (or (and (string=? name "kv_store") (= i 0))
          (and (member name '("attention" "scaled_dot_product_attention")) (memv i '(1 2))))
      SB_INPUT_CACHE SB_INPUT_DATA))

(define (value-of tr name x i)
  (cond ((sym? x)
         (unless (eq? (sym-tracer x) tr)
           (error (format #f "~a: a value of another trace (values do not cross traces)" name)))
         (sym-value x))
        (else
         (let ((out (make-bytevector 4 0)))
           (%check (string->symbol name) (sb-graph-tensor (tracer-graph tr) (slot-kind name i) (%tensor-ptr x)
                                                          (bytevector->pointer out)))
           (keep-alive x)
           (bytevector-s32-native-ref out 0)))))

(define (record tr name srcs args)
  (let* ((vals (map (lambda (x i) (value-of tr name x i)) srcs (iota (length srcs))))
         (sv (make-bytevector (* 4 (max 1 (length vals))) 0))
         (av (%->doubles args))
         (out (make-bytevector 4 0)))
    (for-each (lambda (v i) (bytevector-s32-native-set! sv (* 4 i) v)) vals (iota (length vals)))
    (%check (string->symbol name) (sb-graph-op (tracer-graph tr) (string->pointer name) (bytevector->pointer sv) (length vals)
                                               (bytevector->pointer av) (length args) (bytevector->pointer out)))
    (value-sym tr (bytevector-s32-native-ref out 0))))

(define (mark-output tr x name)
  (%check 'trace (sb-graph-output (tracer-graph tr) (value-of tr "output" x 0) (string->pointer name))))

(define (text-of who print ptr)
  (let ((n-out (make-bytevector 8 0)))
    (print ptr %null-pointer 0 (bytevector->pointer n-out))
    (let* ((n (+ 1 (bytevector-u64-native-ref n-out 0)))
           (buf (make-bytevector n 0)))
      (%check who (print ptr (bytevector->pointer buf) n (bytevector->pointer n-out)))
      (utf8->string (sub-bytevector buf (bytevector-u64-native-ref n-out 0))))))

(define (sub-bytevector bv n) (let ((r (make-bytevector n))) (bytevector-copy! bv 0 r 0 n) r))

(define (graph-text tr) (text-of 'graph-text sb-graph-print (tracer-graph tr)))
(define (program-text prog) "The planned graph of a compiled program, in the text IR." (text-of 'program-text sb-program-print prog))

;;; ---- programs ----

(define* (compile-graph graph #:key (threads 0) (device 'cpu) page-locked-outputs?)
  (let ((out (out-cell))
        (params (make-c-struct (list int int int int int int int int)
                               (list (%device-code device) threads (if page-locked-outputs? 1 0) 0 0 0 0 0))))
    (%check 'trace (sb-graph-compile graph params (bytevector->pointer out)))
    (make-pointer (pointer-address (cell-pointer out)) sb-program-free*)))

(define (tensor-pointers ts)
  (let ((bv (%pointers (map (lambda (t) (if t (%tensor-ptr t) %null-pointer)) ts))))
    (cons bv (bytevector->pointer bv))))

(define* (program-run prog inputs n-out #:optional metas into in-ptrs out-ptrs)
  "Run a compiled program on INPUTS (tensors); its N-OUT outputs as a list of tensors (METAS: their
(shape . type), when known; INTO: tensors written in place, #f where a new one is wanted).
IN-PTRS, OUT-PTRS: (tensor-pointers INPUTS) and (tensor-pointers INTO) made earlier, when INTO has
no #f (sb_program_run then writes nothing into that array)."
  (let ((iv (or in-ptrs (tensor-pointers inputs)))
        (ov (or out-ptrs (tensor-pointers (or into (make-list n-out #f))))))
    (%check 'program-run (sb-program-run prog (cdr iv) (length inputs) (cdr ov) n-out))
    (keep-alive inputs prog into iv ov)
    (if (and into (not (memq #f into)))
        into
        (map (lambda (k meta old)
               (let ((p (make-pointer (bytevector-uint-ref (car ov) (* k (sizeof '*)) (native-endianness) (sizeof '*)))))
                 (cond (old old)
                       (meta (%tensor-free-wrap p #:shape (car meta) #:type (cdr meta)))
                       (else (%tensor-free-wrap p)))))
             (iota n-out) (or metas (make-list n-out #f)) (or into (make-list n-out #f))))))

;;; ---- data-dependent points ----

;; the value of guard g (a sym of tracer tr) on the call's inputs: the graph so far, compiled and run
(define (evaluate-prefix tr threads device)
  (let* ((prog (compile-graph (tracer-graph tr) #:threads threads #:device device))
         (outs (program-run prog (tracer-inputs tr) (length (tracer-guards tr)))))
    (last outs)))

(define (sym-test tr pred x)
  (let* ((i (length (tracer-taken tr)))
         (name (format #f "guard.~a" i)))
    (mark-output tr x name)
    (set-tracer-guards! tr (append (tracer-guards tr) (list (cons x pred))))
    (let ((b (if (< i (length (tracer-known tr)))
                 (list-ref (tracer-known tr) i)
                 (abort-to-prompt (tracer-tag tr) tr pred))))
      (set-tracer-taken! tr (append (tracer-taken tr) (list b)))
      b)))

(set-trace-hooks! record sym-test)

;;; ---- traced procedures ----

;; one specialised graph: the decisions of its path, its program, its output count, whether the
;; procedure returned a list, the guards' predicates
(define-record-type <path>
  (make-path decisions program n-results list? preds metas outs args)
  path?
  (decisions path-decisions)
  (program path-program)
  (n-results path-n-results)
  (list? path-list?)
  (preds path-preds)
  (metas path-metas)      ; (shape . type) of every output, guards first
  (outs path-outs set-path-outs!) ; the last call's output tensors (reused with #:reuse-outputs?)
  (args path-args set-path-args!)) ; #f or #(inputs in-ptrs outs out-ptrs n-in n-out) of the last call, reused while the same tensors come

;; trace PROC on INPUTS with the decisions KNOWN in advance; the new <path> (its programs use
;; THREADS threads, 0 = all cores, on DEVICE)
(define (trace-path proc inputs known threads device page-locked?)
  (let* ((tag (make-prompt-tag "sonicboom-trace"))
         (tr (%make-tracer (graph-create) inputs known '() '() tag))
         (syms (map (lambda (t i) (declare-input tr t i)) inputs (iota (length inputs)))))
    (define (learn k tr* pred)
      (keep-alive tr*)         ; the continuation k waits for a decision nobody knows yet
      (let ((b (and (pred (tensor->list (evaluate-prefix tr threads device))) #t)))
        (call-with-prompt tag (lambda () (k b)) learn)))
    (let* ((result (call-with-prompt tag (lambda () (apply proc syms)) learn))
           (outs (if (list? result) result (list result))))
      (for-each (lambda (x k) (mark-output tr x (format #f "out.~a" k))) outs (iota (length outs)))
      (make-path (tracer-taken tr) (compile-graph (tracer-graph tr) #:threads threads #:device device #:page-locked-outputs? page-locked?)
                 (length outs) (list? result)
                 (map cdr (tracer-guards tr))
                 (map (lambda (x) (if (sym? x) (cons (sym-shape x) (sym-type x)) #f))
                      (append (map car (tracer-guards tr)) outs))
                 #f #f))))

;; run path p on inputs: (values results #f) when every guard agrees, else (values #f decisions)
;; with the decisions the data took up to and including the first disagreeing guard; reuse?: write
;; into the tensors the last call returned
(define (all-eq? a b)
  (cond ((null? a) (null? b)) ((null? b) #f) ((eq? (car a) (car b)) (all-eq? (cdr a) (cdr b))) (else #f)))

;; the pointer arrays for a call of p on inputs into into (#f: new outputs): the last call's when
;; it wrote into the same outputs (the input array rewritten where other input tensors come: a loop
;; allocates nothing for them), else new ones, remembered
(define (call-pointers p inputs into)
  (let ((a (path-args p)))
    (if (and a into (all-eq? (vector-ref a 2) into))
        (begin
          (unless (all-eq? (vector-ref a 0) inputs) ; other input tensors: their addresses, in the same array
            (set-pointers! (car (vector-ref a 1)) inputs)
            (vector-set! a 0 inputs))
          (values (vector-ref a 1) (vector-ref a 3)))
        (let ((in-ptrs (tensor-pointers inputs)))
          (when into (set-path-args! p (vector inputs in-ptrs into (tensor-pointers into) (length inputs) (length into))))
          (values in-ptrs (and into (vector-ref (path-args p) 3)))))))

(define %pointer-size (sizeof '*))
(define (set-pointers! bv ts)
  (let loop ((ts ts) (k 0))
    (when (pair? ts)
      (bytevector-uint-set! bv k (pointer-address (%tensor-ptr (car ts))) (native-endianness) %pointer-size)
      (loop (cdr ts) (+ k %pointer-size)))))

(define (overlaps? outs inputs) (and (pair? outs) (or (memq (car outs) inputs) (overlaps? (cdr outs) inputs))))

(define (run-path p inputs reuse?)
  (if (and reuse? (same-call? p inputs))
      (values (rerun-path p) #f)
      (run-path* p inputs reuse?)))

;; is this call of p the last one again: p has no guards, and the same input tensors come (so the
;; same signature) to be written into the same outputs (which were no input then, nor are now)?
(define (same-call? p inputs)
  (let ((a (path-args p)))
    (and a (null? (path-decisions p)) (eq? (vector-ref a 2) (path-outs p)) (all-eq? (vector-ref a 0) inputs))))

;; p's results of the last call's again, through the pointer arrays it remembered: one foreign call
(define (rerun-path p)
  (let ((a (path-args p)) (outs (path-outs p)))
    (%check 'program-run (sb-program-run (path-program p) (cdr (vector-ref a 1)) (vector-ref a 4)
                                         (cdr (vector-ref a 3)) (vector-ref a 5)))
    (keep-alive a)
    (if (path-list? p) outs (car outs))))

(define (run-path* p inputs reuse?)
  (let* ((n-guards (length (path-decisions p)))
         (old (path-outs p))
         (into (and reuse? old (not (overlaps? old inputs)) old)) ; never over an input
         (outs (call-with-values (lambda () (call-pointers p inputs into))
                 (lambda (in-ptrs out-ptrs)
                   (program-run (path-program p) inputs (+ n-guards (path-n-results p)) (path-metas p) into in-ptrs out-ptrs))))
         (guards (list-head outs n-guards))
         (results (list-tail outs n-guards)))
    (when (and reuse? (not (eq? outs old))) (set-path-outs! p outs))
    (let loop ((gs guards) (preds (path-preds p)) (ds (path-decisions p)) (acc '()))
      (if (null? gs)
          (values (if (path-list? p) results (car results)) #f)
          (let ((b (and ((car preds) (tensor->list (car gs))) #t)))
            (if (eq? b (car ds))
                (loop (cdr gs) (cdr preds) (cdr ds) (cons b acc))
                (values #f (reverse (cons b acc)))))))))

(define (prefix? a b) (and (<= (length a) (length b)) (equal? a (list-head b (length a)))))

(define %traced (make-weak-key-hash-table))

(define (signature inputs) (map (lambda (t) (list (tensor-type t) (tensor-shape t) (tensor-role t))) inputs))
;; do inputs have signature sig? (without building it)
(define (signature-of? sig inputs)
  (cond ((null? sig) (null? inputs))
        ((null? inputs) #f)
        (else (let ((s (car sig)) (t (car inputs)))
                (and (eq? (car s) (tensor-type t)) (equal? (cadr s) (tensor-shape t)) (eq? (caddr s) (tensor-role t))
                     (signature-of? (cdr sig) (cdr inputs)))))))

(define* (trace proc #:key reuse-outputs? (threads 0) (device 'cpu) (page-locked-outputs? reuse-outputs?))
  "PROC traced: a procedure of the same tensors that runs compiled, specialised graphs. Each call
returns new tensors; with #:reuse-outputs? #t a call writes its results into the tensors the
previous call of the same graph returned (no allocation: for loops that read each result before
the next call; a result passed back as an argument is not written over, but a view of it is).
#:threads: the programs' thread count (sb_compile_params.n_threads; 0 = all cores).
#:device: where the programs run, 'cpu, 'cuda (GPU 0) or 'auto (sb_compile_params.device).
#:page-locked-outputs?: on CUDA, results in page-locked host memory, which the GPU writes directly
when they are reused (sb_compile_params.page_locked_outputs; costly to allocate: the default is
#:reuse-outputs?). The CPU, and a library below ABI level 4, ignore it."
  (let ((cache (make-hash-table))    ; signature -> list of <path>, most recently used first
        (last #f))                   ; (signature . paths) of the last call, so a call of the same signature skips the lookup
    (define (paths-of sig) (if (and last (eq? sig (car last))) (cdr last) (hash-ref cache sig '())))
    (define (set-paths! sig paths) (hash-set! cache sig paths) (set! last (cons sig paths)))
    ;; the path of the last call, when this call repeats it (same-call?): a loop passing the same
    ;; tensors again (a decode step refilled in place) skips the signature and the path lookup
    (define (repeat-of inputs)
      (and reuse-outputs? last (pair? (cdr last))
           (let ((p (cadr last))) (and (same-call? p inputs) p))))
    (define (traced . inputs)
      (let ((p (repeat-of inputs)))
        (if p (rerun-path p) (lookup-and-run inputs))))
    (define (lookup-and-run inputs)
      (let ((sig (if (and last (signature-of? (car last) inputs)) (car last) (signature inputs))))
        (let loop ((known '()))
          (let* ((paths (paths-of sig))
                 (p (find (lambda (p) (prefix? known (path-decisions p))) paths)))
            (if (not p)
                (begin (set-paths! sig (cons (trace-path proc inputs known threads device page-locked-outputs?) paths))
                       (loop known))
                (call-with-values (lambda () (run-path p inputs reuse-outputs?))
                  (lambda (results taken)
                    (if (eq? p (car paths))
                        (unless (and last (eq? sig (car last))) (set! last (cons sig paths)))
                        (set-paths! sig (cons p (delete p paths eq?))))
                    (if taken (loop taken) results))))))))
    (hash-set! %traced traced cache)
    traced))

(define (traced-paths traced)
  "The specialised graphs of a traced procedure: a list of (signature decisions) per graph."
  (hash-fold (lambda (sig paths acc) (append (map (lambda (p) (list sig (path-decisions p))) paths) acc))
             '() (hash-ref %traced traced (make-hash-table))))

(define (traced-programs traced)
  "The compiled programs of a traced procedure (for program-text), one per specialised graph."
  (hash-fold (lambda (sig paths acc) (append (map path-program paths) acc)) '() (hash-ref %traced traced (make-hash-table))))

(define-syntax define-model
  (syntax-rules ()
    ((_ (name arg ...) #:reuse-outputs? r body ...) (define name (trace (lambda (arg ...) body ...) #:reuse-outputs? r)))
    ((_ (name arg ...) body ...) (define name (trace (lambda (arg ...) body ...))))))
