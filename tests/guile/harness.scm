;;; SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
;;; tests/guile/harness.scm — the check harness the Guile tests share, taken in with (include
;;; "harness.scm"): (check LABEL OK DETAIL...) counts and prints "FAIL: ..." lines, (raised THUNK)
;;; is the exception THUNK raises or #f, (finish) prints "N passed, N failed" and exits 1 if any
;;; check failed; (f32s BV) is a bytevector of f32 as a list, (nmse A B) the error of list A against
;;; list B. The including file imports (rnrs bytevectors) and (srfi srfi-1).

(define n-pass 0)
(define n-fail 0)
(define (check label ok . detail)
  (if ok
      (set! n-pass (+ n-pass 1))
      (begin (set! n-fail (+ n-fail 1))
             (format #t "FAIL: ~a~{ ~s~}\n" label detail)))
  ok)
(define (raised thunk)
  (with-exception-handler (lambda (e) e) (lambda () (thunk) #f) #:unwind? #t))
(define (finish)
  (format #t "~a passed, ~a failed\n" n-pass n-fail)
  (exit (if (zero? n-fail) 0 1)))
(define (f32s bv) (map (lambda (i) (bytevector-ieee-single-native-ref bv (* 4 i))) (iota (quotient (bytevector-length bv) 4))))
(define (nmse a b)
  (/ (fold + 0 (map (lambda (x y) (* (- x y) (- x y))) a b)) (max 1e-30 (fold + 0 (map (lambda (y) (* y y)) b)))))
