;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; bindings/guile/sonicboom/llama.scm — the (sonicboom llama) module: the dense decoder of
;;; src/runtime/arch/common.c (llama, qwen2, qwen3) written in Scheme over (sonicboom tensor).
;;; One definition, parameterised as the C builder is: optional weights (qwen2's q/k/v biases,
;;; llama 3's rope_freqs, tied output embeddings, qwen3's q/k norms) are used when the file has
;;; them; the rope mode follows the architecture (normal for llama, neox for qwen).
;;; (llama-decoder model path) returns (forward tokens pos) -> logits f32 [n_vocab, T]: run it on
;;; tensors (eager) or trace it ((sonicboom graph)); either writes its K/V into the decoder's own
;;; f32 caches of n-ctx positions, made on #:device ('cpu, the default, 'cuda or 'auto: see
;;; (sonicboom tensor)'s tensor-zeros; a program of either device binds them wherever they live).
(define-module (sonicboom llama)
  #:use-module (sonicboom)
  #:use-module (sonicboom tensor)
  #:use-module (system foreign)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 optargs)
  #:use-module (srfi srfi-1)
  #:export (llama-decoder gguf-number))

(define sb-gguf-open (%lib-fn "sb_gguf_open" int '(* *)))
(define sb-gguf-free (%lib-fn "sb_gguf_free" void '(*)))
(define sb-gguf-find-key (%lib-fn "sb_gguf_find_key" int '(* * *)))
(define sb-gguf-get-float (%lib-fn "sb_gguf_get_float" int (list '* int64 uint64 '*)))

(define (gguf-number path key)
  "The number under KEY in the GGUF file at PATH, or #f when the file has no such key."
  (let ((out (make-bytevector 8 0)) (idx (make-bytevector 8 0)) (val (make-bytevector 8 0)))
    (%check 'gguf-number (sb-gguf-open (string->pointer path) (bytevector->pointer out)))
    (let* ((g (make-pointer (bytevector-u64-native-ref out 0)))
           (found (zero? (sb-gguf-find-key g (string->pointer key) (bytevector->pointer idx))))
           (st (if found (sb-gguf-get-float g (bytevector-s64-native-ref idx 0) 0 (bytevector->pointer val)) 0)))
      (sb-gguf-free g)
      (%check 'gguf-number st)
      (and found (bytevector-ieee-double-native-ref val 0)))))

(define* (llama-decoder model path #:key (n-ctx 256) (device 'cpu))
  (let* ((info (model-info model))
         (hp (lambda (k) (assq-ref info k)))
         (arch (hp 'arch)) (E (hp 'n_embd)) (H (hp 'n_head)) (Hkv (hp 'n_head_kv)) (D (hp 'head_dim))
         (key (lambda (k) (string-append arch "." k)))
         (eps (gguf-number path (key "attention.layer_norm_rms_epsilon")))
         (base (or (gguf-number path (key "rope.freq_base")) 10000))
         (mode (if (member arch '("qwen2" "qwen3")) 2 0))          ; neox : normal
         (w (lambda (fmt . args) (weight-or-false model (apply format #f fmt args))))
         (emb (w "token_embd.weight"))
         (freqs (w "rope_freqs.weight"))
         (out-w (or (w "output.weight") emb))                       ; tied embeddings
         (cache (lambda () (tensor-zeros (list (* Hkv D) n-ctx) #:device device)))
         (caches (map (lambda (l) (cons (cache) (cache)))
                      (iota (hp 'n_layer)))))
    (define (bias x b) (if b (add x b) x))
    (define (norm x wt) (if wt (rms-norm x wt eps) x))
    (define (block x l cache pos T)
      (let* ((p (lambda (name) (w "blk.~a.~a" l name)))
             (h (rms-norm x (p "attn_norm.weight") eps))
             (q (reshape (bias (linear h (p "attn_q.weight")) (p "attn_q.bias")) (list D H T)))
             (k (reshape (bias (linear h (p "attn_k.weight")) (p "attn_k.bias")) (list D Hkv T)))
             (v (bias (linear h (p "attn_v.weight")) (p "attn_v.bias")))
             (q (rope (norm q (p "attn_q_norm.weight")) pos D mode #:base base #:freq-factors freqs))
             (k (rope (norm k (p "attn_k_norm.weight")) pos D mode #:base base #:freq-factors freqs))
             (kc (kv-store! (car cache) (reshape k (list (* Hkv D) T)) pos))
             (vc (kv-store! (cdr cache) v pos))
             (x (add x (linear (attention q kc vc pos Hkv) (p "attn_output.weight"))))
             (h (rms-norm x (p "ffn_norm.weight") eps))
             (f (swiglu (linear h (p "ffn_gate.weight")) (linear h (p "ffn_up.weight")))))
        (add x (linear f (p "ffn_down.weight")))))
    (define (forward tokens pos)
      (let* ((T (car (shape tokens)))
             (x (fold (lambda (cache l x) (block x l cache pos T)) (embedding tokens emb) caches (iota (length caches)))))
        (linear (rms-norm x (w "output_norm.weight") eps) out-w)))
    forward))
