use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{DType, GpuContext, GpuTensor};

params! {
    struct Params {
        tokens: u32,
        cols: u32,
        /// First table row held by this binding.
        row_start: u32,
        /// Rows held by this binding.
        row_count: u32,
    }
}

/// `out[t, :] += table[ids[t], :]` (kernels/gather_add.wgsl): the embedding lookup.
/// Word, position and token-type embeddings are summed by calling it once per table on a
/// zeroed `out`; a table split over several bindings is gathered chunk by chunk.
pub struct GatherAdd {
    kernel: Kernel,
}

impl GatherAdd {
    /// Output elements per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/gather_add.wgsl");
        GatherAdd { kernel: Kernel::with_threads(ctx, "gather_add", Params::WGSL, Self::THREADS, &[], body) }
    }

    /// `blocks`: the table as (first row, `[rows, cols]` block) pairs, as
    /// [`crate::gpu::ChunkedTable::blocks`] lists them. The caller guarantees every id lies
    /// in the table (the encoder checks ids on the host before uploading them); ids outside
    /// every block add nothing.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        ids: &GpuTensor,
        blocks: &[(usize, &GpuTensor)],
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        check(ids.dtype == DType::U32, "gather_add", || "`ids` must be u32".into())?;
        check_f32(out, "gather_add", "out")?;
        let tokens = ids.len();
        let (out_rows, out_cols) = out.dims2("gather_add out")?;
        check(out_rows == tokens, "gather_add", || format!("out {:?} has not {tokens} rows", out.shape))?;
        let groups = grid(ctx, (tokens * out_cols).div_ceil(Self::THREADS))?;
        let mut dispatches = Vec::with_capacity(blocks.len());
        for (row_start, chunk) in blocks {
            check_f32(chunk, "gather_add", "table")?;
            let (rows, cols) = chunk.dims2("gather_add table chunk")?;
            check(cols == out_cols, "gather_add", || {
                format!("a table block of {cols} columns for out {:?}", out.shape)
            })?;
            let params = Params {
                tokens: to_u32(tokens, "gather_add", "tokens")?,
                cols: to_u32(cols, "gather_add", "cols")?,
                row_start: to_u32(*row_start, "gather_add", "row_start")?,
                row_count: to_u32(rows, "gather_add", "rows")?,
            };
            dispatches.push(self.kernel.bind(ctx, &params, &[&ids.buffer, &chunk.buffer, &out.buffer], groups));
        }
        Ok(dispatches)
    }
}
