;; Batched float32 matrix product with WebAssembly SIMD, over the memory of tfjs's wasm backend
;; (imported, so it reads and writes the tensors where they lie). tfjs-backend-wasm 4.22 runs a
;; batched or transposed BatchMatMul as a plain loop at ~1 GFLOP/s; this kernel is what the
;; project registers in its place for those cases (src/runtime/wasmKernels/batchMatMul.ts).
;;
;; bmm(a, b, c, batch, m, k, n, strideA, strideB, transA, transB, scratchA, scratchB, bias):
;;   for each t < batch: C[t] (m×n) = op(A[t]) · op(B[t]) (+ bias, n floats, on every row when
;;   the pointer is not 0), where op transposes when asked;
;;   A[t] starts strideA floats after A[t-1] (0: one A for every t), likewise B; C is dense.
;; Pointers are byte offsets into the memory; a transposed operand is first copied untransposed
;; into its scratch area (m·k or k·n floats), so the inner loops always read rows; a transposed B
;; under few rows of A (m ≤ 16) is read as it is, by dot products.
;; Inner block: 2 rows × 16 columns of C held in eight v128 accumulators, two splats of A and four
;; loads of B per term; then 1 row × 16, × 4 and × 1 for the edges; terms in chunks of 256.
(module
  (import "env" "memory" (memory 1))

  ;; dst (cols × rows) = transpose of src (rows × cols), both row-major floats.
  (func $transpose (param $src i32) (param $dst i32) (param $rows i32) (param $cols i32)
    (local $r i32) (local $c i32) (local $s i32) (local $d i32) (local $rowBytes i32)
    (local.set $rowBytes (i32.shl (local.get $rows) (i32.const 2)))
    (local.set $r (i32.const 0))
    (block $rowsDone
      (loop $rowLoop
        (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $s (i32.add (local.get $src) (i32.shl (i32.mul (local.get $r) (local.get $cols)) (i32.const 2))))
        (local.set $d (i32.add (local.get $dst) (i32.shl (local.get $r) (i32.const 2))))
        (local.set $c (i32.const 0))
        (block $colsDone
          (loop $colLoop
            (br_if $colsDone (i32.ge_u (local.get $c) (local.get $cols)))
            (f32.store (local.get $d) (f32.load (local.get $s)))
            (local.set $s (i32.add (local.get $s) (i32.const 4)))
            (local.set $d (i32.add (local.get $d) (local.get $rowBytes)))
            (local.set $c (i32.add (local.get $c) (i32.const 1)))
            (br $colLoop)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rowLoop))))

  ;; C (m×n) = A (m×k) · B (k×n), all dense row-major. The terms go in chunks of 256 rows of B,
  ;; and within a chunk 16 columns at a time over every row pair, so the 256×16 strip of B read
  ;; by each block stays in the L1 cache while all of A's rows pass it.
  ;; With a bias (a pointer to n floats, 0 for none) every row of C starts from it.
  (func $gemm (param $a i32) (param $b i32) (param $c i32) (param $m i32) (param $k i32) (param $n i32) (param $bias i32)
    (local $i i32) (local $j i32) (local $k0 i32) (local $kl i32)
    (local $aK i32) (local $bK i32) (local $aRow i32) (local $cRow i32)
    (local $kBytes i32) (local $nBytes i32) (local $n16 i32) (local $m2 i32)
    (local.set $kBytes (i32.shl (local.get $k) (i32.const 2)))
    (local.set $nBytes (i32.shl (local.get $n) (i32.const 2)))
    (local.set $n16 (i32.and (local.get $n) (i32.const -16)))
    (local.set $m2 (i32.and (local.get $m) (i32.const -2)))
    (if (i32.eqz (local.get $bias))
      (then (memory.fill (local.get $c) (i32.const 0) (i32.mul (local.get $m) (local.get $nBytes))))
      (else
        (local.set $i (i32.const 0))
        (block $biasDone
          (loop $biasLoop
            (br_if $biasDone (i32.ge_u (local.get $i) (local.get $m)))
            (memory.copy (i32.add (local.get $c) (i32.mul (local.get $i) (local.get $nBytes))) (local.get $bias) (local.get $nBytes))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $biasLoop)))))
    (local.set $k0 (i32.const 0))
    (block $chunksDone
      (loop $chunkLoop
        (br_if $chunksDone (i32.ge_u (local.get $k0) (local.get $k)))
        (local.set $kl (i32.sub (local.get $k) (local.get $k0)))
        (if (i32.gt_u (local.get $kl) (i32.const 256)) (then (local.set $kl (i32.const 256))))
        (local.set $aK (i32.add (local.get $a) (i32.shl (local.get $k0) (i32.const 2))))
        (local.set $bK (i32.add (local.get $b) (i32.mul (local.get $k0) (local.get $nBytes))))
        (local.set $j (i32.const 0))
        (block $blocksDone
          (loop $blockLoop
            (br_if $blocksDone (i32.ge_u (local.get $j) (local.get $n16)))
            (local.set $i (i32.const 0))
            (block $pairsDone
              (loop $pairLoop
                (br_if $pairsDone (i32.ge_u (local.get $i) (local.get $m2)))
                (local.set $aRow (i32.add (local.get $aK) (i32.mul (local.get $i) (local.get $kBytes))))
                (local.set $cRow (i32.add (i32.add (local.get $c) (i32.mul (local.get $i) (local.get $nBytes))) (i32.shl (local.get $j) (i32.const 2))))
                (call $block2x16
                  (local.get $aRow) (i32.add (local.get $aRow) (local.get $kBytes))
                  (i32.add (local.get $bK) (i32.shl (local.get $j) (i32.const 2)))
                  (local.get $cRow) (i32.add (local.get $cRow) (local.get $nBytes))
                  (local.get $kl) (local.get $nBytes))
                (local.set $i (i32.add (local.get $i) (i32.const 2)))
                (br $pairLoop)))
            (local.set $j (i32.add (local.get $j) (i32.const 16)))
            (br $blockLoop)))
        ;; The columns past the last 16 of the paired rows, then all of an odd last row.
        (if (i32.lt_u (local.get $n16) (local.get $n))
          (then
            (local.set $i (i32.const 0))
            (block $rowsDone
              (loop $rowLoop
                (br_if $rowsDone (i32.ge_u (local.get $i) (local.get $m2)))
                (call $edges
                  (i32.add (local.get $aK) (i32.mul (local.get $i) (local.get $kBytes)))
                  (local.get $bK)
                  (i32.add (local.get $c) (i32.mul (local.get $i) (local.get $nBytes)))
                  (local.get $kl) (local.get $n) (local.get $n16))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $rowLoop)))))
        (if (i32.lt_u (local.get $m2) (local.get $m))
          (then
            (call $edges
              (i32.add (local.get $aK) (i32.mul (local.get $m2) (local.get $kBytes)))
              (local.get $bK)
              (i32.add (local.get $c) (i32.mul (local.get $m2) (local.get $nBytes)))
              (local.get $kl) (local.get $n) (i32.const 0))))
        (local.set $k0 (i32.add (local.get $k0) (i32.const 256)))
        (br $chunkLoop))))

  ;; C rows c, c2 [16 columns] += A rows a, a2 [kl terms] · B [kl rows × 16 columns, row stride nBytes].
  (func $block2x16 (param $a i32) (param $a2 i32) (param $b i32) (param $c i32) (param $c2 i32) (param $kl i32) (param $nBytes i32)
    (local $p i32) (local $x v128) (local $y v128)
    (local $b0 v128) (local $b1 v128) (local $b2 v128) (local $b3 v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)
    (local.set $s0 (v128.load (local.get $c))) (local.set $s1 (v128.load offset=16 (local.get $c)))
    (local.set $s2 (v128.load offset=32 (local.get $c))) (local.set $s3 (v128.load offset=48 (local.get $c)))
    (local.set $t0 (v128.load (local.get $c2))) (local.set $t1 (v128.load offset=16 (local.get $c2)))
    (local.set $t2 (v128.load offset=32 (local.get $c2))) (local.set $t3 (v128.load offset=48 (local.get $c2)))
    (local.set $p (i32.const 0))
    (block $termsDone
      (loop $termLoop
        (br_if $termsDone (i32.ge_u (local.get $p) (local.get $kl)))
        (local.set $b0 (v128.load (local.get $b)))
        (local.set $b1 (v128.load offset=16 (local.get $b)))
        (local.set $b2 (v128.load offset=32 (local.get $b)))
        (local.set $b3 (v128.load offset=48 (local.get $b)))
        (local.set $x (f32x4.splat (f32.load (local.get $a))))
        (local.set $y (f32x4.splat (f32.load (local.get $a2))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $x) (local.get $b0))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $x) (local.get $b1))))
        (local.set $s2 (f32x4.add (local.get $s2) (f32x4.mul (local.get $x) (local.get $b2))))
        (local.set $s3 (f32x4.add (local.get $s3) (f32x4.mul (local.get $x) (local.get $b3))))
        (local.set $t0 (f32x4.add (local.get $t0) (f32x4.mul (local.get $y) (local.get $b0))))
        (local.set $t1 (f32x4.add (local.get $t1) (f32x4.mul (local.get $y) (local.get $b1))))
        (local.set $t2 (f32x4.add (local.get $t2) (f32x4.mul (local.get $y) (local.get $b2))))
        (local.set $t3 (f32x4.add (local.get $t3) (f32x4.mul (local.get $y) (local.get $b3))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $a2 (i32.add (local.get $a2) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (local.get $nBytes)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $termLoop)))
    (v128.store (local.get $c) (local.get $s0)) (v128.store offset=16 (local.get $c) (local.get $s1))
    (v128.store offset=32 (local.get $c) (local.get $s2)) (v128.store offset=48 (local.get $c) (local.get $s3))
    (v128.store (local.get $c2) (local.get $t0)) (v128.store offset=16 (local.get $c2) (local.get $t1))
    (v128.store offset=32 (local.get $c2) (local.get $t2)) (v128.store offset=48 (local.get $c2) (local.get $t3)))

  ;; One row of C from column j0 on += A row [k terms] · B [k rows]: 16 columns at a time, then 4, then 1.
  (func $edges (param $aRow i32) (param $b i32) (param $cRow i32) (param $k i32) (param $n i32) (param $j0 i32)
    (local $j i32) (local $p i32) (local $ap i32) (local $bp i32)
    (local $nBytes i32) (local $n16 i32) (local $n4 i32)
    (local $x v128) (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $f f32)
    (local.set $nBytes (i32.shl (local.get $n) (i32.const 2)))
    (local.set $n16 (i32.and (local.get $n) (i32.const -16)))
    (local.set $n4 (i32.and (local.get $n) (i32.const -4)))
    (local.set $j (local.get $j0))
    (block $d16
      (loop $l16
        (br_if $d16 (i32.ge_u (local.get $j) (local.get $n16)))
        (local.set $bp (i32.add (local.get $cRow) (i32.shl (local.get $j) (i32.const 2))))
        (local.set $s0 (v128.load (local.get $bp))) (local.set $s1 (v128.load offset=16 (local.get $bp)))
        (local.set $s2 (v128.load offset=32 (local.get $bp))) (local.set $s3 (v128.load offset=48 (local.get $bp)))
        (local.set $ap (local.get $aRow))
        (local.set $bp (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2))))
        (local.set $p (i32.const 0))
        (block $t16
          (loop $k16
            (br_if $t16 (i32.ge_u (local.get $p) (local.get $k)))
            (local.set $x (f32x4.splat (f32.load (local.get $ap))))
            (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $x) (v128.load (local.get $bp)))))
            (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $x) (v128.load offset=16 (local.get $bp)))))
            (local.set $s2 (f32x4.add (local.get $s2) (f32x4.mul (local.get $x) (v128.load offset=32 (local.get $bp)))))
            (local.set $s3 (f32x4.add (local.get $s3) (f32x4.mul (local.get $x) (v128.load offset=48 (local.get $bp)))))
            (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
            (local.set $bp (i32.add (local.get $bp) (local.get $nBytes)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $k16)))
        (local.set $bp (i32.add (local.get $cRow) (i32.shl (local.get $j) (i32.const 2))))
        (v128.store (local.get $bp) (local.get $s0))
        (v128.store offset=16 (local.get $bp) (local.get $s1))
        (v128.store offset=32 (local.get $bp) (local.get $s2))
        (v128.store offset=48 (local.get $bp) (local.get $s3))
        (local.set $j (i32.add (local.get $j) (i32.const 16)))
        (br $l16)))
    (block $d4
      (loop $l4
        (br_if $d4 (i32.ge_u (local.get $j) (local.get $n4)))
        (local.set $s0 (v128.load (i32.add (local.get $cRow) (i32.shl (local.get $j) (i32.const 2)))))
        (local.set $ap (local.get $aRow))
        (local.set $bp (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2))))
        (local.set $p (i32.const 0))
        (block $t4
          (loop $k4
            (br_if $t4 (i32.ge_u (local.get $p) (local.get $k)))
            (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (f32x4.splat (f32.load (local.get $ap))) (v128.load (local.get $bp)))))
            (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
            (local.set $bp (i32.add (local.get $bp) (local.get $nBytes)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $k4)))
        (v128.store (i32.add (local.get $cRow) (i32.shl (local.get $j) (i32.const 2))) (local.get $s0))
        (local.set $j (i32.add (local.get $j) (i32.const 4)))
        (br $l4)))
    (block $d1
      (loop $l1
        (br_if $d1 (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $f (f32.load (i32.add (local.get $cRow) (i32.shl (local.get $j) (i32.const 2)))))
        (local.set $ap (local.get $aRow))
        (local.set $bp (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2))))
        (local.set $p (i32.const 0))
        (block $t1
          (loop $k1
            (br_if $t1 (i32.ge_u (local.get $p) (local.get $k)))
            (local.set $f (f32.add (local.get $f) (f32.mul (f32.load (local.get $ap)) (f32.load (local.get $bp)))))
            (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
            (local.set $bp (i32.add (local.get $bp) (local.get $nBytes)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $k1)))
        (f32.store (i32.add (local.get $cRow) (i32.shl (local.get $j) (i32.const 2))) (local.get $f))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $l1))))

;; C (m×n) = A (m×k) · Bᵀ, B given as n×k: each entry a dot product of two rows, four terms at a
;; time, B's rows outermost so that each is read once while A's few rows pass it (they stay in
;; the cache). For products of few rows (a decoder's queries against its cached keys, a batch of
;; decoded tokens against the output head), where transposing B first would cost more than the
;; product.
  (func $dots (param $a i32) (param $b i32) (param $c i32) (param $m i32) (param $k i32) (param $n i32) (param $bias i32)
    (local $i i32) (local $j i32) (local $p i32) (local $ap i32) (local $bp i32) (local $bRow i32)
    (local $k4 i32) (local $kBytes i32) (local $s v128) (local $f f32)
    (local.set $k4 (i32.and (local.get $k) (i32.const -4)))
    (local.set $kBytes (i32.shl (local.get $k) (i32.const 2)))
    (local.set $j (i32.const 0))
    (block $colsDone
      (loop $colLoop
        (br_if $colsDone (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $bRow (i32.add (local.get $b) (i32.mul (local.get $j) (local.get $kBytes))))
        (local.set $i (i32.const 0))
        (block $rowsDone
          (loop $rowLoop
            (br_if $rowsDone (i32.ge_u (local.get $i) (local.get $m)))
            (local.set $ap (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $kBytes))))
            (local.set $bp (local.get $bRow))
            (local.set $s (v128.const f32x4 0 0 0 0))
            (local.set $p (i32.const 0))
            (block $vDone
              (loop $vLoop
                (br_if $vDone (i32.ge_u (local.get $p) (local.get $k4)))
                (local.set $s (f32x4.add (local.get $s) (f32x4.mul (v128.load (local.get $ap)) (v128.load (local.get $bp)))))
                (local.set $ap (i32.add (local.get $ap) (i32.const 16)))
                (local.set $bp (i32.add (local.get $bp) (i32.const 16)))
                (local.set $p (i32.add (local.get $p) (i32.const 4)))
                (br $vLoop)))
            (local.set $f
              (f32.add
                (f32.add (f32x4.extract_lane 0 (local.get $s)) (f32x4.extract_lane 1 (local.get $s)))
                (f32.add (f32x4.extract_lane 2 (local.get $s)) (f32x4.extract_lane 3 (local.get $s)))))
            (block $tDone
              (loop $tLoop
                (br_if $tDone (i32.ge_u (local.get $p) (local.get $k)))
                (local.set $f (f32.add (local.get $f) (f32.mul (f32.load (local.get $ap)) (f32.load (local.get $bp)))))
                (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
                (local.set $bp (i32.add (local.get $bp) (i32.const 4)))
                (local.set $p (i32.add (local.get $p) (i32.const 1)))
                (br $tLoop)))
            (if (local.get $bias)
              (then (local.set $f (f32.add (local.get $f) (f32.load (i32.add (local.get $bias) (i32.shl (local.get $j) (i32.const 2))))))))
            (f32.store (i32.add (local.get $c) (i32.shl (i32.add (i32.mul (local.get $i) (local.get $n)) (local.get $j)) (i32.const 2))) (local.get $f))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $rowLoop)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $colLoop))))

  (func (export "bmm")
    (param $a i32) (param $b i32) (param $c i32) (param $batch i32)
    (param $m i32) (param $k i32) (param $n i32) (param $strideA i32) (param $strideB i32)
    (param $transA i32) (param $transB i32) (param $scratchA i32) (param $scratchB i32) (param $bias i32)
    (local $t i32) (local $at i32) (local $bt i32) (local $ct i32) (local $cBytes i32)
    (local.set $cBytes (i32.shl (i32.mul (local.get $m) (local.get $n)) (i32.const 2)))
    (local.set $t (i32.const 0))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $t) (local.get $batch)))
        (local.set $at (i32.add (local.get $a) (i32.shl (i32.mul (local.get $t) (local.get $strideA)) (i32.const 2))))
        (local.set $bt (i32.add (local.get $b) (i32.shl (i32.mul (local.get $t) (local.get $strideB)) (i32.const 2))))
        (local.set $ct (i32.add (local.get $c) (i32.mul (local.get $t) (local.get $cBytes))))
        ;; A shared operand (stride 0) is transposed once.
        (if (i32.and (local.get $transA) (i32.or (i32.eqz (local.get $t)) (i32.ne (local.get $strideA) (i32.const 0))))
          (then (call $transpose (local.get $at) (local.get $scratchA) (local.get $k) (local.get $m))))
        (if (i32.and (local.get $transB) (i32.le_u (local.get $m) (i32.const 16)))
          (then
            (call $dots
              (select (local.get $scratchA) (local.get $at) (local.get $transA))
              (local.get $bt) (local.get $ct) (local.get $m) (local.get $k) (local.get $n) (local.get $bias)))
          (else
            (if (i32.and (local.get $transB) (i32.or (i32.eqz (local.get $t)) (i32.ne (local.get $strideB) (i32.const 0))))
              (then (call $transpose (local.get $bt) (local.get $scratchB) (local.get $n) (local.get $k))))
            (call $gemm
              (select (local.get $scratchA) (local.get $at) (local.get $transA))
              (select (local.get $scratchB) (local.get $bt) (local.get $transB))
              (local.get $ct) (local.get $m) (local.get $k) (local.get $n) (local.get $bias))))
        (local.set $t (i32.add (local.get $t) (i32.const 1)))
        (br $each)))))
