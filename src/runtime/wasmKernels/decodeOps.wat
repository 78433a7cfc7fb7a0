;; The elementwise and row-wise parts of one cached decode layer, with WebAssembly SIMD, over the
;; memory of tfjs's wasm backend (imported, as batchMatMul.wat's). A decode step composed of tfjs
;; ops is ~270 kernel calls for `small` whose dispatch costs as much as the arithmetic; the
;; SelfcestDecodeLayer kernel (decodeLayer.ts) runs a whole layer as one call, made of these
;; functions and the project's matMul kernel.
;;
;; norm(x, out, rows, d, eps): out[r] = (x[r] − mean) / sqrt(var + eps) per row of d floats
;;   (LayerNorm without its affine part; the decoder folds that into the next projection).
;; gelu(p, n): p[i] = x · sigmoid(x · (A + B·x²)) in place, GPT-2's tanh form written with a
;;   sigmoid, A = 2·sqrt(2/π), B = A·0.044715 (gpt.ts's geluNew).
;; softmax(s, mask, rows, heads, width): for each row r and head h, the width scores at
;;   s[(r·heads + h)·width] plus mask[r·width …] become their softmax, in place.
;; add(a, b, out, n): out[i] = a[i] + b[i] (out may be a or b).
;; Pointers are byte offsets; n, d and width need not be multiples of 4 (scalar tails).
;; exp is 2^(x·log2 e) split into an integer power (built in the exponent bits) and a degree-6
;; polynomial on [−½, ½]·ln 2 (relative error ~1e-7); below 2^−126 it is exactly 0, as a float
;; exp underflows, so masked scores (−1e9) add nothing.
(module
  (import "env" "memory" (memory 1))

  (func $exp4 (param $x v128) (result v128)
    (local $t v128) (local $n v128) (local $g v128) (local $p v128)
    ;; t = clamp(x·log2 e, −127, 127); n = round(t); g = (t − n)·ln 2
    (local.set $t (f32x4.mul (local.get $x) (f32x4.splat (f32.const 1.4426950408889634))))
    (local.set $t (f32x4.pmax (local.get $t) (f32x4.splat (f32.const -127))))
    (local.set $t (f32x4.pmin (local.get $t) (f32x4.splat (f32.const 127))))
    (local.set $n (f32x4.nearest (local.get $t)))
    (local.set $g (f32x4.mul (f32x4.sub (local.get $t) (local.get $n)) (f32x4.splat (f32.const 0.6931471805599453))))
    ;; e^g by Horner: 1 + g(1 + g/2(1 + g/3(1 + g/4(1 + g/5(1 + g/6)))))
    (local.set $p (f32x4.add (f32x4.splat (f32.const 1)) (f32x4.mul (local.get $g) (f32x4.splat (f32.const 0.16666666666666666)))))
    (local.set $p (f32x4.add (f32x4.splat (f32.const 1)) (f32x4.mul (f32x4.mul (local.get $g) (f32x4.splat (f32.const 0.2))) (local.get $p))))
    (local.set $p (f32x4.add (f32x4.splat (f32.const 1)) (f32x4.mul (f32x4.mul (local.get $g) (f32x4.splat (f32.const 0.25))) (local.get $p))))
    (local.set $p (f32x4.add (f32x4.splat (f32.const 1)) (f32x4.mul (f32x4.mul (local.get $g) (f32x4.splat (f32.const 0.3333333333333333))) (local.get $p))))
    (local.set $p (f32x4.add (f32x4.splat (f32.const 1)) (f32x4.mul (f32x4.mul (local.get $g) (f32x4.splat (f32.const 0.5))) (local.get $p))))
    (local.set $p (f32x4.add (f32x4.splat (f32.const 1)) (f32x4.mul (local.get $g) (local.get $p))))
    ;; 2^n as the float whose exponent field is n + 127 (n = −127 gives the bits of 0.0)
    (f32x4.mul (local.get $p)
      (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $n)) (i32x4.splat (i32.const 127))) (i32.const 23))))

  ;; One float through exp4 (the scalar tails).
  (func $exp1 (param $x f32) (result f32)
    (f32x4.extract_lane 0 (call $exp4 (f32x4.splat (local.get $x)))))

  (func $hsum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  (func $hmax (param $v v128) (result f32)
    (f32.max
      (f32.max (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.max (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  (func (export "norm") (param $x i32) (param $out i32) (param $rows i32) (param $d i32) (param $eps f32)
    (local $r i32) (local $i i32) (local $d4 i32) (local $row i32) (local $o i32)
    (local $acc v128) (local $c v128) (local $mean f32) (local $var f32) (local $s f32) (local $inv f32)
    (local.set $d4 (i32.and (local.get $d) (i32.const -4)))
    (block $rowsDone
      (loop $rowLoop
        (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $row (i32.add (local.get $x) (i32.shl (i32.mul (local.get $r) (local.get $d)) (i32.const 2))))
        (local.set $o (i32.add (local.get $out) (i32.shl (i32.mul (local.get $r) (local.get $d)) (i32.const 2))))
        ;; mean
        (local.set $acc (f32x4.splat (f32.const 0)))
        (local.set $i (i32.const 0))
        (block $done1 (loop $l1
          (br_if $done1 (i32.ge_u (local.get $i) (local.get $d4)))
          (local.set $acc (f32x4.add (local.get $acc) (v128.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))))))
          (local.set $i (i32.add (local.get $i) (i32.const 4)))
          (br $l1)))
        (local.set $s (call $hsum (local.get $acc)))
        (block $done1t (loop $l1t
          (br_if $done1t (i32.ge_u (local.get $i) (local.get $d)))
          (local.set $s (f32.add (local.get $s) (f32.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l1t)))
        (local.set $mean (f32.div (local.get $s) (f32.convert_i32_u (local.get $d))))
        ;; variance of the centred values
        (local.set $acc (f32x4.splat (f32.const 0)))
        (local.set $i (i32.const 0))
        (block $done2 (loop $l2
          (br_if $done2 (i32.ge_u (local.get $i) (local.get $d4)))
          (local.set $c (f32x4.sub (v128.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (f32x4.splat (local.get $mean))))
          (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $c) (local.get $c))))
          (local.set $i (i32.add (local.get $i) (i32.const 4)))
          (br $l2)))
        (local.set $var (call $hsum (local.get $acc)))
        (block $done2t (loop $l2t
          (br_if $done2t (i32.ge_u (local.get $i) (local.get $d)))
          (local.set $s (f32.sub (f32.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (local.get $mean)))
          (local.set $var (f32.add (local.get $var) (f32.mul (local.get $s) (local.get $s))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l2t)))
        (local.set $inv (f32.div (f32.const 1)
          (f32.sqrt (f32.add (f32.div (local.get $var) (f32.convert_i32_u (local.get $d))) (local.get $eps)))))
        ;; out = (x − mean)·inv
        (local.set $i (i32.const 0))
        (block $done3 (loop $l3
          (br_if $done3 (i32.ge_u (local.get $i) (local.get $d4)))
          (v128.store (i32.add (local.get $o) (i32.shl (local.get $i) (i32.const 2)))
            (f32x4.mul (f32x4.sub (v128.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (f32x4.splat (local.get $mean))) (f32x4.splat (local.get $inv))))
          (local.set $i (i32.add (local.get $i) (i32.const 4)))
          (br $l3)))
        (block $done3t (loop $l3t
          (br_if $done3t (i32.ge_u (local.get $i) (local.get $d)))
          (f32.store (i32.add (local.get $o) (i32.shl (local.get $i) (i32.const 2)))
            (f32.mul (f32.sub (f32.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (local.get $mean)) (local.get $inv)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l3t)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rowLoop))))

  ;; x · sigmoid(x·(A + B·x²)) on four lanes.
  (func $gelu4 (param $x v128) (result v128)
    (local $z v128)
    (local.set $z (f32x4.mul (local.get $x)
      (f32x4.add (f32x4.splat (f32.const 1.5957691216057308))
        (f32x4.mul (f32x4.splat (f32.const 0.07135481627159282)) (f32x4.mul (local.get $x) (local.get $x))))))
    (f32x4.div (local.get $x) (f32x4.add (f32x4.splat (f32.const 1)) (call $exp4 (f32x4.neg (local.get $z))))))

  (func (export "gelu") (param $p i32) (param $n i32)
    (local $i i32) (local $n4 i32) (local $at i32)
    (local.set $n4 (i32.and (local.get $n) (i32.const -4)))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n4)))
      (local.set $at (i32.add (local.get $p) (i32.shl (local.get $i) (i32.const 2))))
      (v128.store (local.get $at) (call $gelu4 (v128.load (local.get $at))))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br $l)))
    (block $doneT (loop $lt
      (br_if $doneT (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $at (i32.add (local.get $p) (i32.shl (local.get $i) (i32.const 2))))
      (f32.store (local.get $at) (f32x4.extract_lane 0 (call $gelu4 (f32x4.splat (f32.load (local.get $at))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $lt))))

  (func (export "softmax") (param $s i32) (param $mask i32) (param $rows i32) (param $heads i32) (param $width i32)
    (local $r i32) (local $h i32) (local $i i32) (local $w4 i32) (local $row i32) (local $m i32)
    (local $acc v128) (local $v v128) (local $max f32) (local $sum f32) (local $inv f32) (local $e f32)
    (local.set $w4 (i32.and (local.get $width) (i32.const -4)))
    (block $rowsDone (loop $rowLoop
      (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rows)))
      (local.set $m (i32.add (local.get $mask) (i32.shl (i32.mul (local.get $r) (local.get $width)) (i32.const 2))))
      (local.set $h (i32.const 0))
      (block $headsDone (loop $headLoop
        (br_if $headsDone (i32.ge_u (local.get $h) (local.get $heads)))
        (local.set $row (i32.add (local.get $s)
          (i32.shl (i32.mul (i32.add (i32.mul (local.get $r) (local.get $heads)) (local.get $h)) (local.get $width)) (i32.const 2))))
        ;; scores + mask, and their maximum
        (local.set $acc (f32x4.splat (f32.const -3.4e38)))
        (local.set $i (i32.const 0))
        (block $d1 (loop $l1
          (br_if $d1 (i32.ge_u (local.get $i) (local.get $w4)))
          (local.set $v (f32x4.add (v128.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))))
            (v128.load (i32.add (local.get $m) (i32.shl (local.get $i) (i32.const 2))))))
          (v128.store (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))) (local.get $v))
          (local.set $acc (f32x4.pmax (local.get $acc) (local.get $v)))
          (local.set $i (i32.add (local.get $i) (i32.const 4)))
          (br $l1)))
        (local.set $max (call $hmax (local.get $acc)))
        (block $d1t (loop $l1t
          (br_if $d1t (i32.ge_u (local.get $i) (local.get $width)))
          (local.set $e (f32.add (f32.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))))
            (f32.load (i32.add (local.get $m) (i32.shl (local.get $i) (i32.const 2))))))
          (f32.store (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))) (local.get $e))
          (local.set $max (f32.max (local.get $max) (local.get $e)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l1t)))
        ;; exp(v − max) and their sum
        (local.set $acc (f32x4.splat (f32.const 0)))
        (local.set $i (i32.const 0))
        (block $d2 (loop $l2
          (br_if $d2 (i32.ge_u (local.get $i) (local.get $w4)))
          (local.set $v (call $exp4 (f32x4.sub (v128.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (f32x4.splat (local.get $max)))))
          (v128.store (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))) (local.get $v))
          (local.set $acc (f32x4.add (local.get $acc) (local.get $v)))
          (local.set $i (i32.add (local.get $i) (i32.const 4)))
          (br $l2)))
        (local.set $sum (call $hsum (local.get $acc)))
        (block $d2t (loop $l2t
          (br_if $d2t (i32.ge_u (local.get $i) (local.get $width)))
          (local.set $e (call $exp1 (f32.sub (f32.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (local.get $max))))
          (f32.store (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2))) (local.get $e))
          (local.set $sum (f32.add (local.get $sum) (local.get $e)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l2t)))
        ;; divide by the sum
        (local.set $inv (f32.div (f32.const 1) (local.get $sum)))
        (local.set $i (i32.const 0))
        (block $d3 (loop $l3
          (br_if $d3 (i32.ge_u (local.get $i) (local.get $w4)))
          (v128.store (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))
            (f32x4.mul (v128.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (f32x4.splat (local.get $inv))))
          (local.set $i (i32.add (local.get $i) (i32.const 4)))
          (br $l3)))
        (block $d3t (loop $l3t
          (br_if $d3t (i32.ge_u (local.get $i) (local.get $width)))
          (f32.store (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))
            (f32.mul (f32.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 2)))) (local.get $inv)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l3t)))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $headLoop)))
      (local.set $r (i32.add (local.get $r) (i32.const 1)))
      (br $rowLoop))))

  (func (export "add") (param $a i32) (param $b i32) (param $out i32) (param $n i32)
    (local $i i32) (local $n4 i32) (local $off i32)
    (local.set $n4 (i32.and (local.get $n) (i32.const -4)))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n4)))
      (local.set $off (i32.shl (local.get $i) (i32.const 2)))
      (v128.store (i32.add (local.get $out) (local.get $off))
        (f32x4.add (v128.load (i32.add (local.get $a) (local.get $off))) (v128.load (i32.add (local.get $b) (local.get $off)))))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br $l)))
    (block $doneT (loop $lt
      (br_if $doneT (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $off (i32.shl (local.get $i) (i32.const 2)))
      (f32.store (i32.add (local.get $out) (local.get $off))
        (f32.add (f32.load (i32.add (local.get $a) (local.get $off))) (f32.load (i32.add (local.get $b) (local.get $off)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $lt)))))
