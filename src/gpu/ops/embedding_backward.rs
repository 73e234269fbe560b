use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel};
use crate::error::{Error, Result};
use crate::gpu::context::{DType, GpuContext, GpuTensor};

params! {
    struct Params {
        /// Distinct ids in the batch (entries of `ids`).
        distinct_ids: u32,
        cols: u32,
        /// First table row held by this binding.
        row_start: u32,
        /// Rows held by this binding.
        row_count: u32,
    }
}

/// For each distinct id of a batch, the tokens that carry it (compressed rows, built on
/// the host): what [`EmbeddingBackward`] needs, since WGSL has no float atomics to let
/// tokens add into a shared row themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokensById {
    /// The distinct ids, ascending.
    pub ids: Vec<u32>,
    /// `ids.len() + 1` offsets into `tokens`: id `ids[u]` is carried by
    /// `tokens[starts[u]..starts[u + 1]]`.
    pub starts: Vec<u32>,
    /// Token positions (row indices of the gradient), ascending within each id.
    pub tokens: Vec<u32>,
}

impl TokensById {
    /// The tokens `t` with `mask[t] != 0` (padding has no gradient to give), grouped by
    /// `ids[t]`.
    pub fn new(ids: &[u32], mask: &[u32]) -> Result<Self> {
        if ids.len() != mask.len() {
            return Err(Error::invalid(format!("{} ids but {} mask values", ids.len(), mask.len())));
        }
        let mut tokens: Vec<u32> = (0..ids.len() as u32).filter(|&t| mask[t as usize] != 0).collect();
        // Stable: tokens stay in order within an id.
        tokens.sort_by_key(|&t| ids[t as usize]);
        let mut out = TokensById { ids: Vec::new(), starts: Vec::new(), tokens };
        for (k, &t) in out.tokens.iter().enumerate() {
            let id = ids[t as usize];
            if out.ids.last() != Some(&id) {
                out.ids.push(id);
                out.starts.push(k as u32);
            }
        }
        out.starts.push(out.tokens.len() as u32);
        Ok(out)
    }

    /// The lists on the device, ready for [`EmbeddingBackward::prepare`].
    pub fn upload(&self, ctx: &GpuContext, label: &str) -> Result<TokensByIdOnDevice> {
        Ok(TokensByIdOnDevice {
            distinct_ids: self.ids.len(),
            ids: ctx.upload_u32(&format!("{label} ids"), &self.ids, &[self.ids.len()])?,
            starts: ctx.upload_u32(&format!("{label} starts"), &self.starts, &[self.starts.len()])?,
            tokens: ctx.upload_u32(&format!("{label} tokens"), &self.tokens, &[self.tokens.len()])?,
        })
    }
}

/// [`TokensById`] uploaded.
pub struct TokensByIdOnDevice {
    distinct_ids: usize,
    ids: GpuTensor,
    starts: GpuTensor,
    tokens: GpuTensor,
}

/// The gradient of an embedding table (kernels/embedding_backward.wgsl): each token's row
/// of `dy` added to its id's row of the table's gradient, table block by table block.
pub struct EmbeddingBackward {
    kernel: Kernel,
}

impl EmbeddingBackward {
    /// Gradient values per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/embedding_backward.wgsl");
        EmbeddingBackward {
            kernel: Kernel::with_threads(ctx, "embedding_backward", Params::WGSL, Self::THREADS, &[], body),
        }
    }

    /// `dy`: `[tokens, cols]`, the gradient of the gathered rows; `grad_blocks`: the table's
    /// gradient as (first row, `[rows, cols]` block) pairs, added to. Ids outside every
    /// block add nothing (the caller checked them against the table).
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        lists: &TokensByIdOnDevice,
        dy: &GpuTensor,
        grad_blocks: &[(usize, &GpuTensor)],
    ) -> Result<Vec<Dispatch>> {
        let op = "embedding_backward";
        check_f32(dy, op, "dy")?;
        for (t, name) in [(&lists.ids, "ids"), (&lists.starts, "starts"), (&lists.tokens, "tokens")] {
            check(t.dtype == DType::U32, op, || format!("`{name}` must be u32"))?;
        }
        let (tokens, cols) = dy.dims2("embedding_backward dy")?;
        check(lists.tokens.len() <= tokens, op, || {
            format!("{} listed tokens for a dy of {tokens} rows", lists.tokens.len())
        })?;
        if lists.distinct_ids == 0 {
            return Ok(Vec::new());
        }
        let groups = grid(ctx, (lists.distinct_ids * cols).div_ceil(Self::THREADS))?;
        let mut dispatches = Vec::with_capacity(grad_blocks.len());
        for (row_start, block) in grad_blocks {
            check_f32(block, op, "grad")?;
            let (rows, block_cols) = block.dims2("embedding_backward grad block")?;
            check(block_cols == cols, op, || {
                format!("a gradient block of {block_cols} columns for dy {:?}", dy.shape)
            })?;
            let params = Params {
                distinct_ids: to_u32(lists.distinct_ids, op, "distinct ids")?,
                cols: to_u32(cols, op, "cols")?,
                row_start: to_u32(*row_start, op, "row_start")?,
                row_count: to_u32(rows, op, "rows")?,
            };
            let buffers = [&lists.ids.buffer, &lists.starts.buffer, &lists.tokens.buffer, &dy.buffer, &block.buffer];
            dispatches.push(self.kernel.bind(ctx, &params, &buffers, groups));
        }
        Ok(dispatches)
    }
}

#[cfg(test)]
mod tests {
    use super::TokensById;

    #[test]
    fn tokens_are_grouped_by_id_in_order_and_padding_is_left_out() {
        // Two sequences of 4 with ids [5 2 5 0 | 2 7 0 0], the last token of the first and
        // the last two of the second padding (pad id 0): id 0 at token 3 is padding too.
        let ids = [5, 2, 5, 0, 2, 7, 0, 0];
        let mask = [1, 1, 1, 0, 1, 1, 0, 0];
        let lists = TokensById::new(&ids, &mask).unwrap();
        assert_eq!(lists.ids, vec![2, 5, 7]);
        assert_eq!(lists.starts, vec![0, 2, 4, 5]);
        assert_eq!(lists.tokens, vec![1, 4, 0, 2, 5]);
        // Nothing real: no id, one offset.
        let none = TokensById::new(&[3, 3], &[0, 0]).unwrap();
        assert_eq!((none.ids.len(), none.starts, none.tokens.len()), (0, vec![0], 0));
        assert!(TokensById::new(&[1, 2], &[1]).is_err());
    }
}
