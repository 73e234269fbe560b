//! Dropout in training on the GPU (kernels/dropout.wgsl: a hidden-state tensor times its
//! mask, forward and, with the same mask, backward) and the hash every mask is drawn with
//! ([`hash`]): its one definition. The CPU trainer's masks (`train::dropout`) call the Rust
//! functions of [`hash`]; the kernels that drop (this op, and attention's probabilities in
//! kernels/attention.wgsl and its backward passes, through attention_dropout.wgsl) run its
//! WGSL twin (kernels/dropout_hash.wgsl) with the constants below put in front of it. So the
//! GPU trainer drops exactly the elements the CPU trainer drops for the same (seed, step,
//! layer, site, input, element).

use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel, Source};
use crate::error::Result;
use crate::gpu::context::{DType, GpuContext, GpuTensor};

/// The counter-based hash of the dropout masks: PCG's RXS-M-XS output permutation used as a
/// hash (`pcg_hash`, Jarzynski and Olano, "Hash Functions for GPU Rendering", JCGT 9(3),
/// 2020), chained over the coordinates, in wrapping `u32` arithmetic as WGSL's `u32`.
pub mod hash {
    /// The LCG step's multiplier and increment, and the output permutation's multiplier and
    /// shifts (PCG's 32-bit RXS-M-XS): the WGSL twin is given these same values.
    pub const PCG_MULTIPLIER: u32 = 747_796_405;
    pub const PCG_INCREMENT: u32 = 2_891_336_453;
    pub const PCG_OUTPUT_MULTIPLIER: u32 = 277_803_737;
    pub const PCG_SELECT_SHIFT: u32 = 28;
    pub const PCG_BASE_SHIFT: u32 = 4;
    pub const PCG_OUTPUT_SHIFT: u32 = 22;

    /// PCG's RXS-M-XS output permutation as a hash of one `u32` (a bijection).
    pub fn pcg_hash(v: u32) -> u32 {
        let state = v.wrapping_mul(PCG_MULTIPLIER).wrapping_add(PCG_INCREMENT);
        let word =
            ((state >> ((state >> PCG_SELECT_SHIFT) + PCG_BASE_SHIFT)) ^ state).wrapping_mul(PCG_OUTPUT_MULTIPLIER);
        (word >> PCG_OUTPUT_SHIFT) ^ word
    }

    /// The key of one input's mask at a site: `input` is the input's index among all the
    /// training set's inputs (an example's inputs in order, examples in file order).
    pub fn row_key(site_key: u32, input: u32) -> u32 {
        pcg_hash(site_key ^ input)
    }

    /// Whether element `index` of the input with key `row_key` is kept.
    pub fn keeps(row_key: u32, index: u32, threshold: u32) -> bool {
        pcg_hash(row_key ^ pcg_hash(index)) >= threshold
    }

    /// The index of a hidden state's element: token `t`'s feature `f` of `width` features.
    pub fn hidden_index(t: usize, f: usize, width: usize) -> u32 {
        (t * width + f) as u32
    }

    /// The index of an attention probability: head `head`, query `i`, key `j`, positions
    /// counted up to `positions` (the model's position limit, the same for every batch),
    /// wrapping as `u32` arithmetic does.
    pub fn attention_index(head: usize, i: usize, j: usize, positions: usize) -> u32 {
        let m = positions as u32;
        (head as u32).wrapping_mul(m).wrapping_add(i as u32).wrapping_mul(m).wrapping_add(j as u32)
    }

    /// kernels/dropout_hash.wgsl with these constants in front of it.
    pub(in crate::gpu::ops) fn wgsl() -> String {
        let constants: String = [
            ("PCG_MULTIPLIER", PCG_MULTIPLIER),
            ("PCG_INCREMENT", PCG_INCREMENT),
            ("PCG_OUTPUT_MULTIPLIER", PCG_OUTPUT_MULTIPLIER),
            ("PCG_SELECT_SHIFT", PCG_SELECT_SHIFT),
            ("PCG_BASE_SHIFT", PCG_BASE_SHIFT),
            ("PCG_OUTPUT_SHIFT", PCG_OUTPUT_SHIFT),
        ]
        .iter()
        .map(|(name, value)| format!("const {name}: u32 = {value}u;\n"))
        .collect();
        constants + include_str!("../kernels/dropout_hash.wgsl")
    }
}

/// One site's masks as a kernel draws them (`train::dropout` computes them): the site's key
/// (seed, step, layer and site hashed), the threshold under which an element's hash is
/// dropped (`p * 2^32`), and the kept elements' multiplier (`1 / (1 - p)` as f32).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaskDraw {
    pub key: u32,
    pub threshold: u32,
    pub scale: f32,
}

/// Dropout of the attention probabilities, for [`super::Attention::prepare_dropping`] and
/// [`super::AttentionBackward::prepare_dropping`].
#[derive(Debug, Clone, Copy)]
pub struct AttentionDropout<'a> {
    pub draw: MaskDraw,
    /// u32 `[sequences]`: each sequence's input index (the masks' input coordinate).
    pub inputs: &'a GpuTensor,
    /// The model's position limit (the probabilities' index, [`hash::attention_index`]).
    pub positions: usize,
}

impl AttentionDropout<'_> {
    /// Checks `inputs` against a batch of `batch` sequences of `seq_len` tokens.
    pub(super) fn check(&self, op: &str, batch: usize, seq_len: usize) -> Result<()> {
        check(self.inputs.dtype == DType::U32 && self.inputs.len() == batch, op, || {
            format!("dropout needs {batch} u32 input indices, got {:?} {:?}", self.inputs.dtype, self.inputs.shape)
        })?;
        check(seq_len <= self.positions, op, || {
            format!("sequences of {seq_len} tokens exceed the masks' {} positions", self.positions)
        })
    }
}

/// The attention kernels' dropout functions (kernels/attention_dropout.wgsl, with the hash
/// and `drop_inputs` declared at `binding`), or, without dropout (`None`), the ones that keep
/// everything (kernels/attention_keep_all.wgsl).
pub(super) fn attention_wgsl(binding: Option<usize>) -> String {
    match binding {
        Some(b) => format!(
            "{}@group(0) @binding({b}) var<storage, read> drop_inputs: array<u32>;\n{}",
            hash::wgsl(),
            include_str!("../kernels/attention_dropout.wgsl")
        ),
        None => include_str!("../kernels/attention_keep_all.wgsl").to_string(),
    }
}

params! {
    struct Params {
        /// Elements.
        len: u32,
        /// Values a row.
        width: u32,
        /// Rows a training input (its padded tokens, or 1: its first token only).
        rows_per_input: u32,
        key: u32,
        threshold: u32,
        scale: f32,
        _pad0: u32,
        _pad1: u32,
    }
}

/// `out = x * mask` for a hidden-state tensor (kernels/dropout.wgsl): the forward pass of
/// dropout at a site, and with the same draw its backward pass (the gradient times the same
/// mask).
pub struct DropoutOp {
    kernel: Kernel,
}

impl DropoutOp {
    /// Elements per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let hash = hash::wgsl();
        let source = Source {
            directives: "",
            params: Params::WGSL,
            constants: &[("THREADS", Self::THREADS)],
            shared: &[&hash],
            body: include_str!("../kernels/dropout.wgsl"),
        };
        DropoutOp { kernel: Kernel::new(ctx, "dropout", source) }
    }

    /// `x`, `out`: `[rows, width]` f32 (distinct buffers); `inputs`: u32, each input's index
    /// in the training set, one per `rows_per_input` rows (row r is token `r %
    /// rows_per_input` of input `inputs[r / rows_per_input]`).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        draw: MaskDraw,
        inputs: &GpuTensor,
        rows_per_input: usize,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let op = "dropout";
        check_f32(x, op, "x")?;
        check_f32(out, op, "out")?;
        let (rows, width) = x.dims2("dropout x")?;
        check(out.shape == x.shape, op, || format!("out {:?} != x {:?}", out.shape, x.shape))?;
        check(rows_per_input > 0 && rows % rows_per_input == 0, op, || {
            format!("{rows} rows are not whole inputs of {rows_per_input}")
        })?;
        let n_inputs = rows / rows_per_input;
        check(inputs.dtype == DType::U32 && inputs.len() == n_inputs, op, || {
            format!("{n_inputs} u32 input indices needed, got {:?} {:?}", inputs.dtype, inputs.shape)
        })?;
        let params = Params {
            len: to_u32(x.len(), op, "len")?,
            width: to_u32(width, op, "width")?,
            rows_per_input: to_u32(rows_per_input, op, "rows_per_input")?,
            key: draw.key,
            threshold: draw.threshold,
            scale: draw.scale,
            _pad0: 0,
            _pad1: 0,
        };
        if x.is_empty() {
            return Ok(Vec::new());
        }
        let groups = grid(ctx, x.len().div_ceil(Self::THREADS))?;
        Ok(vec![self.kernel.bind(ctx, &params, &[&x.buffer, &inputs.buffer, &out.buffer], groups)])
    }
}
