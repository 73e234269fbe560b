//! The strided matrix views the products read and write (the kernels in `matmul` and
//! `panel_kernel` and attention's per-head slices all address memory through them).

/// A strided, read-only `rows x cols` f32 matrix view: element (i, j) is at
/// `data[offset + i * row_stride + j * col_stride]`.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> View<'a> {
    /// A dense row-major matrix.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        View { data, offset: 0, rows, cols, row_stride: cols, col_stride: 1 }
    }

    /// Index of the last element plus one: every access stays below it.
    pub(super) fn extent(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            return self.offset;
        }
        self.offset + (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride + 1
    }
}

/// The strided destination of a product, addressed like [`View`].
pub struct ViewMut<'a> {
    pub data: &'a mut [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}
