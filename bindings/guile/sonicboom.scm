;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; bindings/guile/sonicboom.scm — the (sonicboom) module: SonicBoom's public C ABI
;;; (include/sonicboom.h) from Guile 3.0 through (system foreign) alone, no C glue library.
;;;
;;; Contract:
;;;  - At load the module opens libsonicboom.so (the path in $GUILE_SONICBOOM_LIB, else
;;;    "libsonicboom" on the system's library path) and refuses a library whose
;;;    sb_version_number() has another major.minor than the header this file mirrors (0.1.x: before
;;;    1.0 a minor release may change the ABI). (sonicboom tensor) checks sb_abi_level() >= 2 on
;;;    top of this (tensors, graphs and programs).
;;;  - Every struct crossing the boundary is described once in %struct-layouts, in the header's
;;;    field order with the header's C types; make-c-struct / parse-c-struct lay them out with the
;;;    C rules (tests/guile checks every size and offset against the C compiler's).
;;;  - A failing call raises a &sonicboom-error carrying the sb_status name (a symbol such as
;;;    SB_ERR_IO), its number, its family and the sb_last_error() text; the exception's message is
;;;    "<STATUS>: <detail>". Misuse caught before the C call (a freed handle, a NUL byte inside a
;;;    string the C side reads as NUL-terminated) raises the same kind with SB_ERR_INVALID_ARG.
;;;  - Handles (models, sessions, vocabularies, samplers) are freed by their *-free! procedure or,
;;;    once unreachable, by the garbage collector — sessions always before the model they use, as
;;;    the C ABI requires. A handle must not be used from two threads at once (as in C).
;;;  - Callbacks (generation text, load progress) run on the calling thread. Returning #f from the
;;;    generation callback cancels generation; an exception raised inside a callback stops the C
;;;    call cleanly and is re-raised after it returns (it never unwinds through C frames).
(define-module (sonicboom)
  #:use-module (system foreign)
  #:use-module (system foreign-library)
  #:use-module (rnrs bytevectors)
  #:use-module ((rnrs io ports) #:select (make-transcoder utf-8-codec bytevector->string))
  #:use-module (ice-9 exceptions)
  #:use-module (ice-9 optargs)
  #:use-module (ice-9 threads)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:export (sonicboom-version sonicboom-version-number sonicboom-library-path
            &sonicboom-error sonicboom-error? sonicboom-error-status sonicboom-error-code
            sonicboom-error-family sonicboom-error-detail
            backend-info
            model? model-load model-free! model-info model-vocab
            vocab? vocab-load vocab-free! vocab-n-tokens vocab-special vocab-adds-bos? vocab-adds-eos?
            vocab-chat-format token-eog? token-piece
            tokenize detokenize chat-render chat-tokenize
            session? session-create session-free! session-device session-state session-stats
            session-prefill! session-eval-all! session-decode! session-logits session-truncate!
            sampler? make-sampler sampler-free! sampler-default-params sampler-sample sampler-accept!
            sampler-reset!
            generate
            %struct-layouts %struct-types %status-code))

;;; ---- the library ----

(define sonicboom-library-path (or (getenv "GUILE_SONICBOOM_LIB") "libsonicboom"))

(define %lib
  (with-exception-handler
   (lambda (e)
     (raise-exception
      (make-exception (make-error)
                      (make-exception-with-message
                       (format #f "(sonicboom): cannot load ~a (set GUILE_SONICBOOM_LIB to the path of ~a): ~a"
                               sonicboom-library-path "libsonicboom.so"
                               (if (exception-with-message? e) (exception-message e) e))))))
   (lambda () (load-foreign-library sonicboom-library-path))
   #:unwind? #t))

(define-syntax-rule (define-c name ret cname (arg ...))
  (define name (foreign-library-function %lib cname #:return-type ret #:arg-types (list arg ...))))

;; The header version this file mirrors.
(define %header-major 0)
(define %header-minor 1)

(define-c sb-version-number int "sb_version_number" ())
(define-c sb-version-string '* "sb_version_string" ())

(define sonicboom-version-number (sb-version-number))
(define sonicboom-version (pointer->string (sb-version-string)))

(let ((major (quotient sonicboom-version-number 1000000))
      (minor (remainder (quotient sonicboom-version-number 1000) 1000)))
  (unless (and (= major %header-major) (= minor %header-minor))
    (raise-exception
     (make-exception (make-error)
                     (make-exception-with-message
                      (format #f "(sonicboom): ~a is version ~a (~a), this binding needs ~a.~a.x"
                              sonicboom-library-path sonicboom-version sonicboom-version-number
                              %header-major %header-minor))))))

;;; ---- errors ----

(define-c sb-status-str '* "sb_status_str" (int))
(define-c sb-status-family int "sb_status_family" (int))
(define-c sb-last-error '* "sb_last_error" ())

(define-exception-type &sonicboom-error &error
  make-sonicboom-error sonicboom-error?
  (status sonicboom-error-status)   ; symbol: SB_ERR_IO
  (code sonicboom-error-code)       ; integer: 2
  (family sonicboom-error-family)   ; symbol: the sb_status_family of code
  (detail sonicboom-error-detail))  ; string: sb_last_error() at the failure

(define (status-symbol code) (string->symbol (pointer->string (sb-status-str code))))

(define (raise-sb-error who code detail)
  (let ((status (status-symbol code)))
    (raise-exception
     (make-exception (make-sonicboom-error status code (status-symbol (sb-status-family code)) detail)
                     (make-exception-with-origin who)
                     (make-exception-with-message (format #f "~a: ~a" status detail))))))

;; Status numbers the binding itself tests for.
(define %status-code
  '((SB_OK . 0) (SB_ERR_INVALID_ARG . 1) (SB_ERR_IO . 2) (SB_ERR_CANCELLED . 8)
    (SB_ERR_RANGE . 11) (SB_ERR_BUFFER_TOO_SMALL . 12)))
(define (code-of sym) (assq-ref %status-code sym))

(define (check who st)
  (unless (zero? st) (raise-sb-error who st (pointer->string (sb-last-error) -1 "UTF-8"))))

(define (invalid-arg who fmt . args)
  (raise-sb-error who (code-of 'SB_ERR_INVALID_ARG) (apply format #f fmt args)))

;;; ---- memory helpers ----

;; A C string (UTF-8, NUL-terminated) that C reads whole: a NUL inside would truncate it silently.
(define (c-string who what s)
  (unless (string? s) (invalid-arg who "~a: expected a string, got ~s" what s))
  (when (string-index s #\nul) (invalid-arg who "~a holds a NUL byte: ~s" what s))
  (string->pointer s "UTF-8"))

(define (bool->int x) (if x 1 0))

;; keep-alive: a call through an unknown procedure, so the compiler keeps its arguments (buffers
;; whose raw addresses were written into C structs) alive until this point.
(define keep-alive #f)
(set! keep-alive (lambda args #t))

;; (holding (h ...) body ...): body's values, with the handle records h kept reachable until body
;; has returned. A wrapper passes C the raw pointer taken out of a record; without this the record
;; could become garbage during the C call (its last Scheme use already past) and the guardian
;; would free the C object under it, e.g. in a collection run by a callback or another thread.
(define-syntax-rule (holding (h ...) body ...)
  (call-with-values (lambda () body ...) (lambda vals (keep-alive h ...) (apply values vals))))

(define %replace-utf8 (make-transcoder (utf-8-codec) 'none 'replace))
;; UTF-8 bytes -> string; invalid sequences become U+FFFD (use the #:bytes? variants for bytes).
(define (utf8-bytes->string bv) (bytevector->string bv %replace-utf8))

(define (pointer->bytes ptr len)
  (let ((bv (make-bytevector len)))
    (unless (zero? len) (bytevector-copy! (pointer->bytevector ptr len) 0 bv 0 len))
    bv))

(define %size-t-bytes (sizeof size_t))
(define (make-size-cell) (make-bytevector %size-t-bytes 0))
(define (size-cell-ref bv) (bytevector-uint-ref bv 0 (native-endianness) %size-t-bytes))

;; The header's buffer convention: call (fill ptr cap n-out-ptr) with a buffer of cap elements of
;; elem-size bytes; on SB_ERR_BUFFER_TOO_SMALL retry once with the size *n_out asks for.
;; Returns (values bytevector n).
(define (call-with-buffer who elem-size guess fill)
  (let loop ((cap (max 1 guess)) (tries 0))
    (let* ((buf (make-bytevector (* elem-size cap) 0))
           (n-out (make-size-cell))
           (st (fill (bytevector->pointer buf) cap (bytevector->pointer n-out)))
           (n (size-cell-ref n-out)))
      (cond ((zero? st) (values buf n))
            ((and (= st (code-of 'SB_ERR_BUFFER_TOO_SMALL)) (< tries 2)) (loop (+ n 1) (+ tries 1)))
            (else (check who st))))))

;;; ---- struct layouts (include/sonicboom.h, in field order) ----
;; A field is (NAME TYPE) with TYPE a (system foreign) type or '*, or (NAME (TYPE COUNT)) for an
;; array. Arrays are nested structs of COUNT elements, which C lays out identically.

(define %struct-layouts
  `((sb_backend_info (cuda_compiled ,int) (cuda_devices ,int) (cuda_device_name (,uint8 128))
                     (cuda_cc ,int) (cuda_error (,uint8 256)) (cpu_isa (,uint8 32)))
    (sb_model_params (check_tensors ,int) (progress *) (progress_user *) (no_mmap ,int)
                     (reserved (,int 9)))
    (sb_model_info (arch (,uint8 32)) (name (,uint8 128)) (n_vocab ,int64) (n_embd ,int64)
                   (n_layer ,int64) (n_head ,int64) (n_head_kv ,int64) (head_dim ,int64)
                   (n_ff ,int64) (n_ctx_train ,int64) (n_params ,uint64) (weight_bytes ,uint64))
    (sb_session_params (n_ctx ,int64) (kv_type ,int) (n_threads ,int) (n_batch ,int64)
                       (device ,int) (allow_ctx_extend ,int) (cuda_graphs ,int) (codegen ,int)
                       (act_type ,int) (swa_full ,int) (reserved (,int 6)))
    (sb_session_stats (n_prefill_tokens ,int64) (n_decode_tokens ,int64) (n_reused_tokens ,int64)
                      (prefill_seconds ,double) (decode_seconds ,double) (prefill_tok_s ,double)
                      (decode_tok_s ,double) (decode_gb_s ,double) (n_plans_built ,int64))
    (sb_sampler_params (temp ,float) (top_k ,int32) (top_p ,float) (min_p ,float)
                       (repeat_penalty ,float) (presence_penalty ,float)
                       (frequency_penalty ,float) (penalty_last_n ,int32) (seed ,uint64)
                       (reserved (,int 8)))
    (sb_generate_params (n_predict ,int64) (stop *) (n_stop ,size_t) (add_special ,int)
                        (parse_special ,int) (ignore_eos ,int) (reserved (,int 7)))
    (sb_generate_result (n_prompt ,int64) (n_reused ,int64) (n_generated ,int64)
                        (prefill_seconds ,double) (decode_seconds ,double) (stop ,int))
    (sb_chat_message (role *) (content *))))

(define (field-type t) (if (pair? t) (make-list (cadr t) (car t)) t))
(define (layout name)
  (or (assq-ref %struct-layouts name) (error "no struct layout" name)))
;; The (system foreign) type list of a struct: what sizeof, make-c-struct and parse-c-struct take.
(define (%struct-types name) (map (lambda (f) (field-type (cadr f))) (layout name)))

(define (zero-of t) (if (eq? t '*) %null-pointer 0))
(define (field-zero t) (if (pair? t) (make-list (cadr t) (zero-of (car t))) (zero-of t)))

;; A fresh C struct NAME (a pointer to GC-managed memory) with the fields in alist VALUES set and
;; every other field zero.
(define (struct-pointer name values)
  (make-c-struct (%struct-types name)
                 (map (lambda (f)
                        (let ((v (assq (car f) values)))
                          (if v (cdr v) (field-zero (cadr f)))))
                      (layout name))))

;; The fields of the struct NAME at ptr as an alist (char arrays as strings).
(define (struct->alist name ptr)
  (map (lambda (f v)
         (cons (car f)
               (if (and (pair? (cadr f)) (eqv? (car (cadr f)) uint8))
                   (let ((bytes (take-while (lambda (b) (not (zero? b))) v)))
                     (utf8-bytes->string (u8-list->bytevector bytes)))
                   v)))
       (layout name) (parse-c-struct ptr (%struct-types name))))

;; An out-parameter: a zeroed buffer of struct NAME.
(define (struct-buffer name) (make-bytevector (sizeof (%struct-types name)) 0))

;; Read a defaults struct through its sb_*_default_params function.
(define (defaults name fill)
  (let ((buf (struct-buffer name)))
    (fill (bytevector->pointer buf))
    (struct->alist name (bytevector->pointer buf))))

;; alist with the (key . value) pairs of overrides (#f values skipped) replacing the old ones.
(define (override alist overrides)
  (fold (lambda (kv acc) (if (cdr kv) (assq-set! (alist-copy acc) (car kv) (cdr kv)) acc))
        alist overrides))

;;; ---- lifetimes ----
;; Sessions keep their model reachable, so a model becomes garbage only with its sessions; the
;; guardian hands both back and they are freed sessions first. A model whose sessions are not yet
;; all freed waits in %pending-models.

(define %guardian (make-guardian))
(define %lifetime-lock (make-recursive-mutex)) ; the after-gc hook may run inside a free
(define %pending-models '())

(define-record-type <model>
  (%make-model ptr n-sessions vocab)
  model?
  (ptr model-ptr set-model-ptr!)
  (n-sessions model-n-sessions set-model-n-sessions!)
  (vocab model-vocab-record set-model-vocab-record!))

(define-record-type <session>
  (%make-session ptr model)
  session?
  (ptr session-ptr set-session-ptr!)
  (model session-model))

(define-record-type <vocab>
  (%make-vocab ptr owner)        ; owner: the <model> it is borrowed from, or #f if loaded alone
  vocab?
  (ptr %vocab-ptr set-vocab-ptr!)
  (owner vocab-owner))

(define-record-type <sampler>
  (%make-sampler ptr n-vocab)
  sampler?
  (ptr sampler-ptr set-sampler-ptr!)
  (n-vocab sampler-n-vocab))

(define-c sb-model-free void "sb_model_free" ('*))
(define-c sb-session-free void "sb_session_free" ('*))
(define-c sb-vocab-free void "sb_vocab_free" ('*))
(define-c sb-sampler-free void "sb_sampler_free" ('*))

(define (free-session-locked s)
  (let ((p (session-ptr s)) (m (session-model s)))
    (when p
      (set-session-ptr! s #f)
      (sb-session-free p)
      (set-model-n-sessions! m (- (model-n-sessions m) 1)))))

(define (free-model-locked m)
  (let ((p (model-ptr m)))
    (when p
      (set-model-ptr! m #f)
      (sb-model-free p))))

;; Free what the collector found unreachable: sessions, then models without live sessions.
(define (collect-garbage-handles)
  (with-mutex %lifetime-lock
    (let loop ((found '()))
      (let ((x (%guardian)))
        (if x
            (loop (cons x found))
            (begin
              (for-each (lambda (x)
                          (cond ((session? x) (free-session-locked x))
                                ((sampler? x) (let ((p (sampler-ptr x)))
                                                (when p (set-sampler-ptr! x #f) (sb-sampler-free p))))
                                ((vocab? x) (let ((p (%vocab-ptr x)))
                                              (when p (set-vocab-ptr! x #f) (sb-vocab-free p))))))
                        found)
              (set! %pending-models (append (filter model? found) %pending-models))
              (let-values (((ready waiting) (partition (lambda (m) (zero? (model-n-sessions m)))
                                                       %pending-models)))
                (for-each free-model-locked ready)
                (set! %pending-models waiting))))))))

(add-hook! after-gc-hook collect-garbage-handles)

(define (live who what ptr)
  (unless ptr (invalid-arg who "~a was freed" what))
  ptr)

;;; ---- backends ----

(define-c sb-backend-get-info int "sb_backend_get_info" ('*))

(define (backend-info)
  "What this build and machine offer, as an alist (cuda_compiled cuda_devices cuda_device_name
cuda_cc cuda_error cpu_isa)."
  (let ((buf (struct-buffer 'sb_backend_info)))
    (check 'backend-info (sb-backend-get-info (bytevector->pointer buf)))
    (struct->alist 'sb_backend_info (bytevector->pointer buf))))

;;; ---- callbacks ----

;; Wrap proc for C: an exception inside is kept in the box and turned into "stop" (1), so it never
;; unwinds through C frames; (rethrow-from box) raises it again after the C call returned.
(define (guarded-callback box proc)
  (lambda args
    (with-exception-handler
     (lambda (e) (set-car! box e) 1)
     (lambda () (if (apply proc args) 0 1))
     #:unwind? #t)))

(define (rethrow-from box)
  (when (car box) (raise-exception (car box))))

;;; ---- models ----

(define-c sb-model-default-params void "sb_model_default_params" ('*))
(define-c sb-model-load int "sb_model_load" ('* '* '*))
(define-c sb-model-get-info int "sb_model_get_info" ('* '*))
(define-c sb-model-get-vocab '* "sb_model_get_vocab" ('*))

(define* (model-load path #:key check-tensors? no-mmap? progress)
  "Load the GGUF model at PATH. PROGRESS, if given, is called as (PROGRESS done total tensor-name)
while the tensor data is read (tensor-name #f when the library names none); returning #f cancels
the load (SB_ERR_CANCELLED)."
  (collect-garbage-handles)
  (let* ((box (list #f))
         (cb (and progress
                  (procedure->pointer
                   int
                   (guarded-callback box (lambda (user done total what)
                                           (progress done total (and (not (null-pointer? what))
                                                                     (pointer->string what -1 "UTF-8")))))
                   (list '* uint64 uint64 '*))))
         (params (struct-pointer
                  'sb_model_params
                  (override (defaults 'sb_model_params sb-model-default-params)
                            `((check_tensors . ,(and check-tensors? 1))
                              (no_mmap . ,(and no-mmap? 1))
                              (progress . ,cb)))))
         (out (make-bytevector (sizeof '*) 0))
         (cpath (c-string 'model-load "the model path" path))
         (st (sb-model-load cpath params (bytevector->pointer out))))
    (keep-alive cb params cpath)
    (rethrow-from box)
    (check 'model-load st)
    (let ((m (%make-model (dereference-pointer (bytevector->pointer out)) 0 #f)))
      (set-model-vocab-record! m (%make-vocab (sb-model-get-vocab (model-ptr m)) m))
      (%guardian m)
      m)))

(define (model-free! m)
  "Free the model now. Its sessions must be freed first (SB_ERR_INVALID_ARG otherwise)."
  (with-mutex %lifetime-lock
    (unless (zero? (model-n-sessions m))
      (invalid-arg 'model-free! "the model still has ~a open session(s): free them first"
                   (model-n-sessions m)))
    (free-model-locked m)))

(define (model-info m)
  "The model's facts as an alist: arch name n_vocab n_embd n_layer n_head n_head_kv head_dim n_ff
n_ctx_train n_params weight_bytes."
  (holding (m)
    (let ((buf (struct-buffer 'sb_model_info)))
      (check 'model-info (sb-model-get-info (live 'model-info "the model" (model-ptr m))
                                            (bytevector->pointer buf)))
      (struct->alist 'sb_model_info (bytevector->pointer buf)))))

(define (model-vocab m)
  "The model's vocabulary (valid while the model lives)."
  (live 'model-vocab "the model" (model-ptr m))
  (model-vocab-record m))

;;; ---- vocabulary ----

(define-c sb-vocab-load int "sb_vocab_load" ('* '*))
(define-c sb-vocab-n-tokens int32 "sb_vocab_n_tokens" ('*))
(define-c sb-vocab-get-special int32 "sb_vocab_get_special" ('* int))
(define-c sb-vocab-adds-bos int "sb_vocab_adds_bos" ('*))
(define-c sb-vocab-adds-eos int "sb_vocab_adds_eos" ('*))
(define-c sb-vocab-chat-format '* "sb_vocab_chat_format" ('*))
(define-c sb-token-is-eog int "sb_token_is_eog" ('* int32))
(define-c sb-token-to-piece int "sb_token_to_piece" ('* int32 int '* size_t '*))
(define-c sb-tokenize int "sb_tokenize" ('* '* size_t int int '* size_t '*))
(define-c sb-detokenize int "sb_detokenize" ('* '* size_t unsigned-int '* size_t '*))
(define-c sb-chat-render int "sb_chat_render" ('* '* size_t int '* size_t '*))
(define-c sb-chat-tokenize int "sb_chat_tokenize" ('* '* size_t int '* size_t '*))

(define (vocab-load path)
  "Load only the vocabulary of a GGUF file."
  (collect-garbage-handles)
  (let* ((out (make-bytevector (sizeof '*) 0))
         (cpath (c-string 'vocab-load "the vocabulary path" path)))
    (check 'vocab-load (sb-vocab-load cpath (bytevector->pointer out)))
    (let ((v (%make-vocab (dereference-pointer (bytevector->pointer out)) #f)))
      (%guardian v)
      v)))

(define (vocab-free! v)
  "Free a vocabulary loaded with vocab-load (a model's own vocabulary goes with the model)."
  (with-mutex %lifetime-lock
    (let ((p (%vocab-ptr v)))
      (when (and p (not (vocab-owner v)))
        (set-vocab-ptr! v #f)
        (sb-vocab-free p)))))

;; The vocabulary pointer of a <vocab> or a <model>, checked alive.
(define (vocab-ptr who x)
  (cond ((model? x) (live who "the model" (model-ptr x)) (%vocab-ptr (model-vocab-record x)))
        ((vocab? x)
         (when (vocab-owner x) (live who "the vocabulary's model" (model-ptr (vocab-owner x))))
         (live who "the vocabulary" (%vocab-ptr x)))
        (else (invalid-arg who "expected a model or a vocabulary, got ~s" x))))

(define (vocab-n-tokens v)
  (holding (v)
    (sb-vocab-n-tokens (vocab-ptr 'vocab-n-tokens v))))
(define (vocab-adds-bos? v)
  (holding (v)
    (= 1 (sb-vocab-adds-bos (vocab-ptr 'vocab-adds-bos? v)))))
(define (vocab-adds-eos? v)
  (holding (v)
    (= 1 (sb-vocab-adds-eos (vocab-ptr 'vocab-adds-eos? v)))))
(define (vocab-chat-format v)
  (holding (v)
    (pointer->string (sb-vocab-chat-format (vocab-ptr 'vocab-chat-format v)))))
(define (token-eog? v token)
  (holding (v)
    (= 1 (sb-token-is-eog (vocab-ptr 'token-eog? v) token))))

(define %specials '(bos eos eot eom unk sep pad mask))
(define (vocab-special v which)
  "The id of special token WHICH (bos eos eot eom unk sep pad mask), or #f if the vocabulary has none."
  (holding (v)
    (let ((i (list-index (lambda (s) (eq? s which)) %specials)))
      (unless i (invalid-arg 'vocab-special "unknown special token ~s (one of ~s)" which %specials))
      (let ((id (sb-vocab-get-special (vocab-ptr 'vocab-special v) i)))
        (and (>= id 0) id)))))

(define (ids->bytevector who ids)
  (unless (and (list? ids) (every integer? ids)) (invalid-arg who "expected a list of token ids, got ~s" ids))
  (let ((bv (make-bytevector (* 4 (max 1 (length ids))) 0)))
    (for-each (lambda (id i)
                (unless (and (exact-integer? id) (<= (- (expt 2 31)) id (- (expt 2 31) 1)))
                  (raise-sb-error who (code-of 'SB_ERR_RANGE)
                                  (format #f "token id ~a (index ~a) is not a 32-bit integer" id i)))
                (bytevector-s32-native-set! bv (* 4 i) id))
              ids (iota (length ids)))
    bv))

(define (bytevector->ids bv n)
  (map (lambda (i) (bytevector-s32-native-ref bv (* 4 i))) (iota n)))

(define (finish-text bv n bytes?)
  (let ((out (pointer->bytes (bytevector->pointer bv) n)))
    (if bytes? out (utf8-bytes->string out))))

(define* (tokenize v text #:key (add-special? #t) (parse-special? #f))
  "Token ids (a list) of TEXT (a string, or a bytevector of raw bytes) with vocabulary or model V."
  (holding (v)
    (let* ((vp (vocab-ptr 'tokenize v))
           (bytes (cond ((string? text) (string->utf8 text))
                        ((bytevector? text) text)
                        (else (invalid-arg 'tokenize "expected a string or a bytevector, got ~s" text))))
           (len (bytevector-length bytes)))
      (let-values (((buf n) (call-with-buffer
                             'tokenize 4 (+ len 8)
                             (lambda (out cap n-out)
                               (sb-tokenize vp (bytevector->pointer bytes) len (bool->int add-special?)
                                            (bool->int parse-special?) out cap n-out)))))
        (bytevector->ids buf n)))))

(define* (detokenize v ids #:key remove-special? unparse-special? no-clean-spaces? bytes?)
  "The text of token IDS: a string (invalid UTF-8 as U+FFFD), or with #:bytes? #t a bytevector."
  (holding (v)
    (let* ((vp (vocab-ptr 'detokenize v))
           (idv (ids->bytevector 'detokenize ids))
           (flags (logior (if remove-special? 1 0) (if unparse-special? 2 0) (if no-clean-spaces? 4 0))))
      (let-values (((buf n) (call-with-buffer
                             'detokenize 1 (+ 16 (* 8 (length ids)))
                             (lambda (out cap n-out)
                               (sb-detokenize vp (bytevector->pointer idv) (length ids) flags out cap n-out)))))
        (finish-text buf n bytes?)))))

(define* (token-piece v token #:key special? bytes?)
  "The text one token renders to (special? #t: control tokens as their text)."
  (holding (v)
    (let ((vp (vocab-ptr 'token-piece v)))
      (let-values (((buf n) (call-with-buffer
                             'token-piece 1 32
                             (lambda (out cap n-out)
                               (sb-token-to-piece vp token (bool->int special?) out cap n-out)))))
        (finish-text buf n bytes?)))))

;; MESSAGES as a C array of sb_chat_message: (values pointer count keep) where keep holds the
;; strings the array points to.
(define (chat-messages who messages)
  (unless (and (list? messages) (pair? messages))
    (invalid-arg who "expected a non-empty list of (role . content) pairs, got ~s" messages))
  (let* ((strings (map (lambda (m i)
                         (unless (and (pair? m) (or (symbol? (car m)) (string? (car m))))
                           (invalid-arg who "message ~a: expected (role . content), got ~s" i m))
                         (let ((role (if (symbol? (car m)) (symbol->string (car m)) (car m))))
                           (cons (c-string who (format #f "message ~a role" i) role)
                                 (c-string who (format #f "message ~a content" i) (cdr m)))))
                       messages (iota (length messages))))
         (one (sizeof (%struct-types 'sb_chat_message)))
         (arr (make-bytevector (* one (length messages)) 0)))
    (for-each (lambda (s i)
                (let ((p (struct-pointer 'sb_chat_message `((role . ,(car s)) (content . ,(cdr s))))))
                  (bytevector-copy! (pointer->bytevector p one) 0 arr (* i one) one)))
              strings (iota (length messages)))
    (values (bytevector->pointer arr) (length messages) (cons arr strings))))

(define* (chat-render v messages #:key (add-generation-prompt? #t) bytes?)
  "The prompt text of MESSAGES, a list of (role . content) with role system, user or assistant (a
symbol or a string), in the vocabulary's chat format."
  (holding (v)
    (let ((vp (vocab-ptr 'chat-render v)))
      (let*-values (((arr n keep) (chat-messages 'chat-render messages))
                    ((buf len) (call-with-buffer
                                'chat-render 1 256
                                (lambda (out cap n-out)
                                  (sb-chat-render vp arr n (bool->int add-generation-prompt?) out cap n-out)))))
        (keep-alive keep)
        (finish-text buf len bytes?)))))

(define* (chat-tokenize v messages #:key (add-generation-prompt? #t))
  "Token ids of MESSAGES in the chat format; message content is never read as special tokens."
  (holding (v)
    (let ((vp (vocab-ptr 'chat-tokenize v)))
      (let*-values (((arr n keep) (chat-messages 'chat-tokenize messages))
                    ((buf len) (call-with-buffer
                                'chat-tokenize 4 256
                                (lambda (out cap n-out)
                                  (sb-chat-tokenize vp arr n (bool->int add-generation-prompt?) out cap n-out)))))
        (keep-alive keep)
        (bytevector->ids buf len)))))

;;; ---- sessions ----

(define-c sb-session-default-params void "sb_session_default_params" ('*))
(define-c sb-session-create int "sb_session_create" ('* '* '*))
(define-c sb-session-device int "sb_session_device" ('*))
(define-c sb-session-prefill int "sb_session_prefill" ('* '* size_t '*))
(define-c sb-session-decode int "sb_session_decode" ('* int32))
(define-c sb-session-get-logits int "sb_session_get_logits" ('* '* '*))
(define-c sb-session-get-state int "sb_session_get_state" ('* '* '*))
(define-c sb-session-truncate int "sb_session_truncate" ('* int64))
(define-c sb-session-get-stats int "sb_session_get_stats" ('* '*))

(define %devices '((cpu . 0) (cuda . 1) (auto . 2)))
(define %kv-types '((f32 . 0) (f16 . 1)))

(define (enum-value who what table x)
  (or (and x (assq-ref table x))
      (invalid-arg who "~a: expected one of ~s, got ~s" what (map car table) x)))

(define* (session-create m #:key (n-ctx 0) (kv-type 'f32) (n-threads 0) (n-batch 0) (device 'cpu)
                         allow-ctx-extend?)
  "A session on model M. DEVICE: cpu, cuda or auto; KV-TYPE: f32 or f16; 0 means the default."
  (holding (m)
    (collect-garbage-handles)
    (let* ((mp (live 'session-create "the model" (model-ptr m)))
           (params (struct-pointer
                    'sb_session_params
                    (override (defaults 'sb_session_params sb-session-default-params)
                              `((n_ctx . ,n-ctx)
                                (kv_type . ,(enum-value 'session-create "kv-type" %kv-types kv-type))
                                (n_threads . ,n-threads)
                                (n_batch . ,n-batch)
                                (device . ,(enum-value 'session-create "device" %devices device))
                                (allow_ctx_extend . ,(and allow-ctx-extend? 1))))))
           (out (make-bytevector (sizeof '*) 0)))
      (check 'session-create (sb-session-create mp params (bytevector->pointer out)))
      (let ((s (%make-session (dereference-pointer (bytevector->pointer out)) m)))
        (with-mutex %lifetime-lock (set-model-n-sessions! m (+ 1 (model-n-sessions m))))
        (%guardian s)
        s))))

(define (session-free! s)
  (with-mutex %lifetime-lock (free-session-locked s)))

(define (sptr who s) (live who "the session" (session-ptr s)))

(define (session-device s)
  (holding (s)
    (if (= 1 (sb-session-device (sptr 'session-device s))) 'cuda 'cpu)))

(define (session-state s)
  "(values n-cached n-ctx)"
  (holding (s)
    (let ((a (make-bytevector 8 0)) (b (make-bytevector 8 0)))
      (check 'session-state (sb-session-get-state (sptr 'session-state s) (bytevector->pointer a)
                                                  (bytevector->pointer b)))
      (values (bytevector-s64-native-ref a 0) (bytevector-s64-native-ref b 0)))))

(define (session-stats s)
  (holding (s)
    (let ((buf (struct-buffer 'sb_session_stats)))
      (check 'session-stats (sb-session-get-stats (sptr 'session-stats s) (bytevector->pointer buf)))
      (struct->alist 'sb_session_stats (bytevector->pointer buf)))))

(define (session-prefill! s ids)
  "Evaluate the token ids, reusing the cached prefix; returns the number of reused tokens."
  (holding (s)
    (let ((idv (ids->bytevector 'session-prefill! ids)) (reused (make-bytevector 8 0)))
      (check 'session-prefill! (sb-session-prefill (sptr 'session-prefill! s) (bytevector->pointer idv)
                                                   (length ids) (bytevector->pointer reused)))
      (bytevector-s64-native-ref reused 0))))

(define-c sb-session-eval-all int "sb_session_eval_all" ('* '* size_t '*))

(define (session-eval-all! s ids n-vocab)
  "Append the token ids and return every position's logits: an f32 bytevector of
(length ids) × N-VOCAB floats, row i after token i."
  (holding (s)
    (let ((idv (ids->bytevector 'session-eval-all! ids))
          (out (make-bytevector (* 4 n-vocab (length ids)) 0)))
      (check 'session-eval-all! (sb-session-eval-all (sptr 'session-eval-all! s) (bytevector->pointer idv)
                                                     (length ids) (bytevector->pointer out)))
      out)))

(define (session-decode! s token)
  (holding (s)
    (check 'session-decode! (sb-session-decode (sptr 'session-decode! s) token))))

(define (session-logits s)
  "A copy of the logits after the last evaluated token, as an f32 bytevector of n_vocab floats."
  (holding (s)
    (let ((lp (make-bytevector (sizeof '*) 0)) (nv (make-bytevector 8 0)))
      (check 'session-logits (sb-session-get-logits (sptr 'session-logits s) (bytevector->pointer lp)
                                                    (bytevector->pointer nv)))
      (pointer->bytes (dereference-pointer (bytevector->pointer lp))
                      (* 4 (bytevector-s64-native-ref nv 0))))))

(define (session-truncate! s n)
  (holding (s)
    (check 'session-truncate! (sb-session-truncate (sptr 'session-truncate! s) n))))

;;; ---- sampling ----

(define-c sb-sampler-default-params void "sb_sampler_default_params" ('*))
(define-c sb-sampler-create int "sb_sampler_create" ('* int64 '*))
(define-c sb-sampler-sample int "sb_sampler_sample" ('* '* '*))
(define-c sb-sampler-accept int "sb_sampler_accept" ('* int32))
(define-c sb-sampler-reset int "sb_sampler_reset" ('*))

(define (sampler-default-params)
  "The library's sampling defaults as an alist (temp top_k top_p min_p repeat_penalty
presence_penalty frequency_penalty penalty_last_n seed)."
  (filter (lambda (kv) (not (eq? (car kv) 'reserved)))
          (defaults 'sb_sampler_params sb-sampler-default-params)))

(define* (make-sampler model-or-n-vocab #:key temp top-k top-p min-p repeat-penalty presence-penalty
                       frequency-penalty penalty-last-n seed)
  "A sampler for MODEL-OR-N-VOCAB (a model or a vocabulary size); unset keys keep the library's
defaults (sampler-default-params); #:temp 0 is greedy."
  (holding (model-or-n-vocab)
    (let* ((n-vocab (if (model? model-or-n-vocab)
                        (assq-ref (model-info model-or-n-vocab) 'n_vocab)
                        model-or-n-vocab))
           (params (struct-pointer
                    'sb_sampler_params
                    (override (defaults 'sb_sampler_params sb-sampler-default-params)
                              `((temp . ,(and temp (exact->inexact temp)))
                                (top_k . ,top-k)
                                (top_p . ,(and top-p (exact->inexact top-p)))
                                (min_p . ,(and min-p (exact->inexact min-p)))
                                (repeat_penalty . ,(and repeat-penalty (exact->inexact repeat-penalty)))
                                (presence_penalty . ,(and presence-penalty (exact->inexact presence-penalty)))
                                (frequency_penalty . ,(and frequency-penalty (exact->inexact frequency-penalty)))
                                (penalty_last_n . ,penalty-last-n)
                                (seed . ,seed)))))
           (out (make-bytevector (sizeof '*) 0)))
      (check 'make-sampler (sb-sampler-create params n-vocab (bytevector->pointer out)))
      (let ((smp (%make-sampler (dereference-pointer (bytevector->pointer out)) n-vocab)))
        (%guardian smp)
        smp))))

(define (sampler-free! smp)
  (with-mutex %lifetime-lock
    (let ((p (sampler-ptr smp)))
      (when p (set-sampler-ptr! smp #f) (sb-sampler-free p)))))

(define (smp-ptr who smp) (live who "the sampler" (sampler-ptr smp)))

(define (sampler-sample smp logits)
  "Pick a token id from LOGITS, an f32 bytevector of n_vocab floats (as session-logits returns)."
  (holding (smp)
    (unless (and (bytevector? logits) (= (bytevector-length logits) (* 4 (sampler-n-vocab smp))))
      (invalid-arg 'sampler-sample "expected an f32 bytevector of ~a logits" (sampler-n-vocab smp)))
    (let ((tok (make-bytevector 4 0)))
      (check 'sampler-sample (sb-sampler-sample (smp-ptr 'sampler-sample smp) (bytevector->pointer logits)
                                                (bytevector->pointer tok)))
      (bytevector-s32-native-ref tok 0))))

(define (sampler-accept! smp token)
  (holding (smp)
    (check 'sampler-accept! (sb-sampler-accept (smp-ptr 'sampler-accept! smp) token))))

(define (sampler-reset! smp)
  (holding (smp)
    (check 'sampler-reset! (sb-sampler-reset (smp-ptr 'sampler-reset! smp)))))

;;; ---- generation ----

(define-c sb-generate-default-params void "sb_generate_default_params" ('*))
(define-c sb-generate int "sb_generate" ('* '* '* size_t '* '* '* '*))
(define-c sb-generate-tokens int "sb_generate_tokens" ('* '* '* size_t '* '* '* '*))

(define %stop-reasons #(length eog string context))

;; STOPS as a C array of char * (values pointer keep).
(define (stop-array stops)
  (unless (and (list? stops) (every string? stops))
    (invalid-arg 'generate "#:stop: expected a list of strings, got ~s" stops))
  (let* ((ptrs (map (lambda (s) (c-string 'generate "a stop string" s)) stops))
         (arr (make-bytevector (* (sizeof '*) (max 1 (length ptrs))) 0)))
    (for-each (lambda (p i)
                (bytevector-uint-set! arr (* i (sizeof '*)) (pointer-address p) (native-endianness) (sizeof '*)))
              ptrs (iota (length ptrs)))
    (values (if (null? ptrs) %null-pointer (bytevector->pointer arr)) (cons arr ptrs))))

(define* (generate s smp prompt #:key (n-predict 128) (stop '()) (add-special? #t) parse-special?
                   ignore-eos? on-text bytes?)
  "Generate from PROMPT (a string, or a list of token ids) on session S with sampler SMP.
ON-TEXT, if given, is called as (ON-TEXT text token) with each new piece of text (whole UTF-8
characters) and the token that completed it (-1 for the final flush); returning #f stops
generation. With #:bytes? #t pieces and the result's text are bytevectors, not strings.
Returns an alist: text n_prompt n_reused n_generated prefill_seconds decode_seconds and stop, one
of length eog string context cancelled."
  (holding (s smp)
    (let*-values (((sp) (sptr 'generate s))
                  ((mp) (smp-ptr 'generate smp))
                  ((stops keep) (stop-array stop))
                  ((params) (struct-pointer
                             'sb_generate_params
                             (override (defaults 'sb_generate_params sb-generate-default-params)
                                       `((n_predict . ,n-predict) (stop . ,stops) (n_stop . ,(length stop))
                                         (add_special . ,(bool->int add-special?))
                                         (parse_special . ,(bool->int parse-special?))
                                         (ignore_eos . ,(bool->int ignore-eos?))))))
                  ((pieces) (list '()))
                  ((box) (list #f))
                  ((cb) (procedure->pointer
                         int
                         (guarded-callback
                          box
                          (lambda (user text len token)
                            (let ((bv (pointer->bytes text len)))
                              (set-car! pieces (cons bv (car pieces)))
                              (or (not on-text) (on-text (if bytes? bv (utf8-bytes->string bv)) token)))))
                         (list '* '* size_t int32)))
                  ((res) (struct-buffer 'sb_generate_result))
                  ((st) (cond ((string? prompt)
                               (let ((bv (string->utf8 prompt)))
                                 (sb-generate sp mp (bytevector->pointer bv) (bytevector-length bv) params cb
                                              %null-pointer (bytevector->pointer res))))
                              ((list? prompt)
                               (let ((idv (ids->bytevector 'generate prompt)))
                                 (sb-generate-tokens sp mp (bytevector->pointer idv) (length prompt) params cb
                                                     %null-pointer (bytevector->pointer res))))
                              (else (invalid-arg 'generate "prompt: expected a string or a list of token ids, got ~s"
                                                 prompt)))))
      (keep-alive keep params cb)
      (rethrow-from box)
      (unless (= st (code-of 'SB_ERR_CANCELLED)) (check 'generate st))
      (let* ((r (struct->alist 'sb_generate_result (bytevector->pointer res)))
             (text (apply bytevector-append (reverse (car pieces)))))
        `((text . ,(if bytes? text (utf8-bytes->string text)))
          ,@(filter (lambda (kv) (not (eq? (car kv) 'stop))) r)
          (stop . ,(if (zero? st) (vector-ref %stop-reasons (assq-ref r 'stop)) 'cancelled)))))))

(define (bytevector-append . bvs)
  (let ((out (make-bytevector (apply + (map bytevector-length bvs)))))
    (let loop ((bvs bvs) (at 0))
      (unless (null? bvs)
        (bytevector-copy! (car bvs) 0 out at (bytevector-length (car bvs)))
        (loop (cdr bvs) (+ at (bytevector-length (car bvs))))))
    out))
