;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; bindings/guile/sonicboom/tensor.scm — the (sonicboom tensor) module: tensors as Scheme values
;;; and the op table of include/sonicboom.h ("tensors, graphs and programs", ABI level 2) as
;;; procedures, over (system foreign) alone.
;;;
;;; Contract:
;;;  - At load the module requires sb_abi_level() >= 2 of the library (sonicboom) opened, and
;;;    refuses an older one with one line naming both levels.
;;;  - A <tensor> wraps an sb_tensor; the garbage collector frees it (a finalizer calling
;;;    sb_tensor_free; the library's buffers are reference-counted, so a view may outlive its
;;;    source). A weight tensor keeps its <model> reachable; model-free! on a model whose weights
;;;    are still in use is the caller's error, as in C.
;;;  - Tensors are made on a #:device: 'cpu (the default), 'cuda (GPU 0; the library keeps the
;;;    host and GPU copies coherent) or 'auto (CUDA where a GPU is usable, else the CPU).
;;;  - Every op procedure takes tensors (it runs at once: an eager one-node graph through the
;;;    planner and the kernels of its sources' device) or symbolic values recorded by (sonicboom graph)'s tracer (it
;;;    records into that graph). Concrete tensors given to a traced op are bound into the graph
;;;    (weights, caches). Failures raise &sonicboom-error with the status and the library's text,
;;;    which names the op and the shapes.
;;;  - Names follow torch.nn.functional: (linear x w [b]), (embedding idx w), (rms-norm x w eps),
;;;    (softmax x), (silu x), (gelu x [#:approximate 'tanh]), (gelu-tanh x) = gelu(x,
;;;    approximate="tanh"), (layer-norm x [w [b]] [#:eps]), (concat xs dim) = torch.cat,
;;;    (permute x dims), (transpose x d0 d1), (attention q k v pos n-head-kv ...) =
;;;    scaled_dot_product_attention with a causal KV cache. Dims are ne indices (0 innermost).
(define-module (sonicboom tensor)
  #:use-module (sonicboom)
  #:use-module (system foreign)
  #:use-module (system foreign-library)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 optargs)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:export (tensor? tensor tensor-zeros tensor-write! tokens positions weight weight-or-false
            tensor-shape tensor-type tensor-role tensor->list tensor->f32vector tensor-view? tensor-device
            shape dtype
            embedding linear matmul add mul scale softcap silu gelu-tanh swiglu geglu rms-norm
            softmax reshape slice rope kv-store! attention
            layer-norm gelu concat permute transpose
            tensor-test op-names
            ;; for (sonicboom graph)
            <sym> make-sym sym? sym-tracer sym-value sym-shape sym-type
            set-trace-hooks! %tensor-ptr %type-code %code-type %device-code %lib-fn %check %->doubles %pointers))

;;; ---- the library ----

(define %lib (@@ (sonicboom) %lib))
(define %check (@@ (sonicboom) check))
(define %model-ptr (@@ (sonicboom) model-ptr))
(define keep-alive (@@ (sonicboom) keep-alive))
(define (%lib-fn name ret args) (foreign-library-function %lib name #:return-type ret #:arg-types args))

(define %abi-needed 2)
(define sb-abi-level
  (false-if-exception (%lib-fn "sb_abi_level" int '())))
(let ((level (if sb-abi-level (sb-abi-level) 1)))
  (when (< level %abi-needed)
    (error (format #f "(sonicboom tensor): ~a has ABI level ~a; tensors and graphs need level ~a"
                   sonicboom-library-path level %abi-needed))))

(define sb-tensor-create (%lib-fn "sb_tensor_create" int (list int int int '* '* size_t '*)))
(define sb-tensor-from-weight (%lib-fn "sb_tensor_from_weight" int '(* * *)))
(define sb-tensor-read-f32 (%lib-fn "sb_tensor_read_f32" int (list '* '* size_t '*)))
(define sb-tensor-get-info (%lib-fn "sb_tensor_get_info" int '(* *)))
(define sb-tensor-op (%lib-fn "sb_tensor_op" int (list '* '* int '* int '*)))
(define sb-tensor-write (false-if-exception (%lib-fn "sb_tensor_write" int (list '* '* size_t)))) ; ABI level 4
(define sb-op-name (%lib-fn "sb_op_name" '* (list int)))
(define %tensor-free (foreign-library-pointer %lib "sb_tensor_free"))

;; sb_type numbers of the types a Scheme program names
(define %types '((f32 . 0) (f16 . 1) (q4_0 . 2) (q8_0 . 8) (q4_K . 12) (q6_K . 14) (i32 . 26) (bf16 . 30)))
(define (%type-code t)
  (or (assq-ref %types t) (if (integer? t) t (error "unknown tensor type" t))))
(define (%code-type c)
  (or (any (lambda (p) (and (= (cdr p) c) (car p))) %types) c))

;;; ---- tensors ----

;; ptr: the sb_tensor (a pointer object whose finalizer frees it); role: data | tokens | pos;
;; keep: what must stay reachable while the tensor lives (a weight's <model>)
(define-record-type <tensor>
  (%make-tensor ptr shape type role keep)
  tensor?
  (ptr %tensor-ptr)
  (shape tensor-shape)
  (type tensor-type)
  (role tensor-role)
  (keep tensor-keep))

;; a symbolic value of a graph being traced: (sonicboom graph) makes them
(define-record-type <sym>
  (make-sym tracer value shape type)
  sym?
  (tracer sym-tracer)
  (value sym-value)
  (shape sym-shape)
  (type sym-type))

(define (shape x) (if (sym? x) (sym-shape x) (tensor-shape x)))
(define (dtype x) (if (sym? x) (sym-type x) (tensor-type x)))

(define (out-cell) (make-bytevector (sizeof '*) 0))
(define (cell-pointer bv) (dereference-pointer (bytevector->pointer bv)))

(define (info-of ptr)
  ;; sb_tensor_info: int type, device, n_dims; int64 ne[4]; uint64 nbytes; int is_view; int reserved[5]
  (let* ((types (list int int int int64 int64 int64 int64 uint64 int int int int int int))
         (buf (make-bytevector (sizeof types) 0)))
    (%check 'tensor-info (sb-tensor-get-info ptr (bytevector->pointer buf)))
    (parse-c-struct (bytevector->pointer buf) types)))

;; a <tensor> for a fresh sb_tensor pointer (the finalizer takes it over); shape and type are
;; asked of the library unless the caller knows them
(define* (wrap ptr #:key (role 'data) keep shape type)
  (if shape
      (%make-tensor (make-pointer (pointer-address ptr) %tensor-free) shape type role keep)
      (let* ((info (info-of ptr))
             (n-dims (list-ref info 2)))
        (%make-tensor (make-pointer (pointer-address ptr) %tensor-free)
                      (take (list-head (cdddr info) 4) n-dims)
                      (%code-type (car info)) role keep))))

(define (tensor-view? t) (= 1 (list-ref (info-of (%tensor-ptr t)) 8)))
(define (tensor-device t) "Where T is computed on: 'cpu or 'cuda." (if (= 1 (list-ref (info-of (%tensor-ptr t)) 1)) 'cuda 'cpu))

;; SB_DEVICE_* of 'cpu, 'cuda, 'auto
(define (%device-code d)
  (case d ((cpu) 0) ((cuda) 1) ((auto) 2) (else (error (format #f "device ~s: 'cpu, 'cuda or 'auto" d)))))

(define (ne-pointer dims)
  (let ((bv (make-bytevector 32 0)))
    (for-each (lambda (d i) (bytevector-s64-native-set! bv (* 8 i) d)) dims (iota (length dims)))
    bv))

(define (fill-bytevector type n data)
  (let ((bv (make-bytevector (* 4 n) 0)))
    (cond ((bytevector? data) (bytevector-copy! data 0 bv 0 (min (bytevector-length data) (* 4 n))))
          (else
           (unless (= (length data) n)
             (error (format #f "tensor: ~a values for ~a elements" (length data) n)))
           (let loop ((vs data) (k 0))
             (when (pair? vs)
               (if (eq? type 'i32)
                   (bytevector-s32-native-set! bv k (car vs))
                   (bytevector-ieee-single-native-set! bv k (car vs)))
               (loop (cdr vs) (+ k 4))))))
    bv))

(define* (tensor data #:key (shape (list (if (bytevector? data) (quotient (bytevector-length data) 4) (length data))))
                 (type 'f32) (role 'data) (device 'cpu))
  "A tensor of TYPE (f32 or i32) and SHAPE (ne[0] first) on DEVICE ('cpu, 'cuda or 'auto) holding
DATA (a list of numbers, or a bytevector in the type's layout)."
  (let* ((n (apply * shape))
         (bv (fill-bytevector type n data))
         (out (out-cell))
         (ne (ne-pointer shape)))
    (%check 'tensor (sb-tensor-create (%device-code device) (%type-code type) (length shape) (bytevector->pointer ne)
                                      (bytevector->pointer bv) (bytevector-length bv) (bytevector->pointer out)))
    ;; the shape and type as created (sb_tensor_get_info would say the same): asking costs more
    ;; garbage than the rest of the call, and a decode loop makes two input tensors a step
    (wrap (cell-pointer out) #:role role #:shape shape #:type (%code-type (%type-code type)))))

(define* (tensor-zeros shape #:key (type 'f32) (device 'cpu))
  "A zero-filled tensor on DEVICE (a KV cache: f32 or f16 [Dkv C])."
  (let ((out (out-cell)) (ne (ne-pointer shape)))
    (%check 'tensor-zeros (sb-tensor-create (%device-code device) (%type-code type) (length shape) (bytevector->pointer ne)
                                            %null-pointer 0 (bytevector->pointer out)))
    (wrap (cell-pointer out))))

(define (tensor-write! t data)
  "Replace T's values with DATA (a list of numbers, or a bytevector in T's type's layout; as many as
T holds): a loop refills its input tensors (a decode step's token and position) instead of making
new ones, and a traced call given the same tensors again is its cheapest (sb_tensor_write: ABI
level 4). Views of the same memory see the new values; a model's weight is refused."
  (unless sb-tensor-write
    (error (format #f "tensor-write!: ~a has no sb_tensor_write (ABI level 4 needed)" sonicboom-library-path)))
  (let ((bv (if (bytevector? data) data (fill-bytevector (tensor-type t) (apply * (tensor-shape t)) data))))
    (%check 'tensor-write! (sb-tensor-write (%tensor-ptr t) (bytevector->pointer bv) (bytevector-length bv)))
    (keep-alive t bv)))

(define (tokens ids) "An i32 tensor of token ids, the tokens input of a traced model." (tensor ids #:type 'i32 #:role 'tokens))
(define (positions ps) "An i32 tensor of positions, the pos input of a traced model." (tensor ps #:type 'i32 #:role 'pos))

(define (weight model name)
  "The model's weight NAME, zero-copy in its file type (quantized stays quantized)."
  (let ((out (out-cell)) (cname (string->pointer name "UTF-8")))
    (%check 'weight (sb-tensor-from-weight ((@@ (sonicboom) live) 'weight "the model" (%model-ptr model))
                                           cname (bytevector->pointer out)))
    (keep-alive cname)
    (wrap (cell-pointer out) #:keep model)))

(define (weight-or-false model name)
  "(weight model name), or #f when the model has no such tensor (optional weights: biases)."
  (catch #t
    (lambda () (weight model name))
    (lambda (key . args)
      (let ((e (and (pair? args) (car args))))
        (if (and (sonicboom-error? e) (eq? (sonicboom-error-status e) 'SB_ERR_NOT_FOUND)) #f
            (apply throw key args))))))

(define (tensor->f32vector t)
  "The values as a bytevector of native f32 (dequantized; i32 converted)."
  (let* ((n (apply * (tensor-shape t)))
         (bv (make-bytevector (* 4 (max n 1)) 0))
         (n-out (make-bytevector 8 0)))
    (%check 'tensor->f32vector (sb-tensor-read-f32 (%tensor-ptr t) (bytevector->pointer bv) n (bytevector->pointer n-out)))
    (keep-alive t)
    bv))

(define (tensor->list t)
  "The values as a list of reals, ne[0] fastest."
  (let ((bv (tensor->f32vector t)))
    (map (lambda (i) (bytevector-ieee-single-native-ref bv (* 4 i))) (iota (apply * (tensor-shape t))))))

;;; ---- ops ----

(define (op-names)
  "The op table's names (sb_op_name), torch.nn.functional's where an op has a twin."
  (let loop ((i 0) (acc '()))
    (let ((p (sb-op-name i)))
      (if (null-pointer? p) (reverse acc) (loop (+ i 1) (cons (pointer->string p) acc))))))

(define (%->doubles args)
  (let ((bv (make-bytevector (* 8 (max 1 (length args))) 0)))
    (for-each (lambda (a i) (bytevector-ieee-double-native-set! bv (* 8 i) (exact->inexact a))) args (iota (length args)))
    bv))

(define (%pointers ptrs)
  (let ((bv (make-bytevector (* (sizeof '*) (max 1 (length ptrs))) 0)))
    (for-each (lambda (p i) (bytevector-uint-set! bv (* i (sizeof '*)) (pointer-address p) (native-endianness) (sizeof '*)))
              ptrs (iota (length ptrs)))
    bv))

(define (eager name srcs args)
  (let* ((ptrs (map %tensor-ptr srcs))
         (sv (%pointers ptrs))
         (av (%->doubles args))
         (out (out-cell))
         (st (sb-tensor-op (string->pointer name) (bytevector->pointer sv) (length srcs)
                           (bytevector->pointer av) (length args) (bytevector->pointer out))))
    (keep-alive srcs ptrs)
    (%check (string->symbol name) st)
    ;; reshape and kv_store return views: they keep what their source keeps
    (wrap (cell-pointer out) #:keep (tensor-keep (car srcs)))))

;; set by (sonicboom graph): how a symbolic value records an op / a data-dependent test
(define %sym-apply #f)
(define %sym-test #f)
(define (set-trace-hooks! apply test) (set! %sym-apply apply) (set! %sym-test test))

(define (op name srcs . args)
  (let ((s (find sym? srcs)))
    (if s (%sym-apply (sym-tracer s) name srcs args) (eager name srcs args))))

(define (tensor-test pred x)
  "(PRED values) for the values of X as a list. On a traced value this is the data-dependent
point: the tracer specialises the graph on the outcome and guards it."
  (if (sym? x) (%sym-test (sym-tracer x) pred x) (and (pred (tensor->list x)) #t)))

(define (embedding idx w) (op "embedding" (list idx w)))
(define* (linear x w #:optional b) (op "linear" (if b (list x w b) (list x w))))
(define (matmul w x) (op "matmul" (list w x)))
(define (add a b) (op "add" (list a b)))
(define (mul a b) (op "mul" (list a b)))
(define (scale x s) (op "scale" (list x) s))
(define (softcap x c) (op "softcap" (list x) c))
(define (silu x) (op "silu" (list x)))
(define (gelu-tanh x) (op "gelu_tanh" (list x)))
(define (swiglu g u) (op "swiglu" (list g u)))
(define (geglu g u) (op "geglu" (list g u)))
(define (rms-norm x w eps) (op "rms_norm" (if w (list x w) (list x)) eps))
(define (softmax x) (op "softmax" (list x)))
(define (reshape x dims) (apply op "reshape" (list x) dims))
(define (slice x start n) (op "slice" (list x) start n))
(define* (rope x pos n-rot mode #:key (base 10000) (freq-scale 1) freq-factors)
  (op "rope" (if freq-factors (list x pos freq-factors) (list x pos)) n-rot mode base freq-scale))
(define (kv-store! cache x pos) (op "kv_store" (list cache x pos)))
(define* (attention q k v pos n-head-kv #:key scale (window 0) (softcap 0))
  (apply op "attention" (list q k v pos) n-head-kv
         (if scale (list scale window softcap) (if (and (zero? window) (zero? softcap)) '()
                                                   (error "attention: give #:scale with #:window or #:softcap")))))

(define* (layer-norm x #:optional w b #:key (eps 1e-5))
  "torch.nn.functional.layer_norm over ne[0]: (x - mean) / sqrt(var + EPS), times W, plus B
(each [ne0] or x's shape; a bias needs a weight)."
  (when (and b (not w)) (error "layer-norm: a bias without a weight (give a weight of ones)"))
  (op "layer_norm" (cond (b (list x w b)) (w (list x w)) (else (list x))) eps))
(define* (gelu x #:key (approximate 'none))
  "GELU: exact (erf) with #:approximate 'none (torch's default), the tanh form with 'tanh."
  (case approximate
    ((none) (op "gelu" (list x)))
    ((tanh) (op "gelu_tanh" (list x)))
    (else (error "gelu: #:approximate is 'none or 'tanh, not" approximate))))
(define (concat xs dim)
  "torch.cat: the tensors XS (2 to 8, f32, equal but along ne[DIM]) joined along ne[DIM] (a copy)."
  (op "concat" xs dim))
(define (permute x dims)
  "X with its dims reordered: result ne[k] = x ne[(list-ref DIMS k)]; dims past DIMS stay. A copy,
or a view when the memory order is kept (only dims of 1 move)."
  (apply op "permute" (list x) dims))
(define (transpose x d0 d1) "X with ne[D0] and ne[D1] swapped (a permute)." (op "transpose" (list x) d0 d1))
