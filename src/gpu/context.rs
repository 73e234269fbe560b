//! The GPU device and everything that is not a kernel: choosing the adapter, asking for
//! its real limits, creating buffers, splitting tables that do not fit one binding, and
//! reading results back without blocking (the browser cannot block on a poll).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};

/// What the adapter is, in the words a bench table or the page shows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AdapterSummary {
    pub name: String,
    /// "Vulkan", "Metal", "Dx12", "Gl" natively; "BrowserWebGpu" in the browser.
    pub backend: String,
    /// "DiscreteGpu", "IntegratedGpu", "Cpu", ...
    pub device_type: String,
    pub driver: String,
    /// A software adapter (lavapipe, SwiftShader): correct but slow, never a speed target.
    pub is_fallback: bool,
    /// Weights may be stored as f16 (the adapter has `shader-f16`).
    pub shader_f16: bool,
    /// Dispatches can be timed on the GPU itself (`timestamp-query`): what
    /// `GpuEncoder::profile` needs.
    pub timestamps: bool,
}

impl std::fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, {}", self.name, self.backend, self.device_type)?;
        if self.is_fallback {
            write!(f, ", software fallback")?;
        }
        write!(f, ")")
    }
}

/// The element type of a [`GpuTensor`]'s buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    /// Weights only, on adapters with `shader-f16`.
    F16,
    U32,
}

/// A buffer on the device with the shape the kernels check before they dispatch.
#[derive(Debug)]
pub struct GpuTensor {
    pub buffer: wgpu::Buffer,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

impl GpuTensor {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The shape as (rows, columns) when it is a matrix, for error messages and checks.
    pub fn dims2(&self, what: &str) -> Result<(usize, usize)> {
        match self.shape.as_slice() {
            [r, c] => Ok((*r, *c)),
            other => Err(Error::invalid(format!("gpu: {what} must be 2-D, got shape {other:?}"))),
        }
    }
}

/// A table (e.g. word embeddings, 250k rows for XLM-R) stored as consecutive row blocks,
/// each small enough for one storage binding.
#[derive(Debug)]
pub struct ChunkedTable {
    /// (first row of the chunk, the chunk as a [rows, cols] tensor)
    pub chunks: Vec<(usize, GpuTensor)>,
    pub rows: usize,
    pub cols: usize,
}

impl ChunkedTable {
    /// (first row, block) pairs, as the gather ([`crate::gpu::ops::GatherAdd`]) reads them.
    pub fn blocks(&self) -> Vec<(usize, &GpuTensor)> {
        self.chunks.iter().map(|(start, t)| (*start, t)).collect()
    }
}

/// The device, its queue and what the adapter allows. A clone shares the device (wgpu's
/// handles are reference counted): the page's trainer uses the kept encoder's.
#[derive(Clone)]
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// The adapter's own limits, requested in full (not wgpu's conservative defaults).
    pub limits: wgpu::Limits,
    pub adapter: AdapterSummary,
    /// Every kernel compiled on this device, by its assembled source: an encoder or a
    /// trainer made again on the same device (every job of a page, every case of the
    /// gradient check) reuses them instead of compiling them again, which on a software
    /// adapter took most of a small job's time.
    pub(crate) pipelines: Arc<Mutex<HashMap<String, wgpu::ComputePipeline>>>,
    /// Set when the device is lost (a driver reset, the browser reclaiming it): a context
    /// kept for later jobs is opened again instead ([`crate::gpu::open_encoder`]).
    lost: Arc<AtomicBool>,
}

impl GpuContext {
    /// Finds an adapter (a real GPU first, a software one otherwise) and opens a device
    /// with the adapter's limits and `shader-f16` when present. Errors when there is no
    /// adapter at all, so the caller can fall back to the CPU path.
    pub async fn new() -> Result<Self> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| Error::model(format!("no WebGPU/wgpu adapter: {e}")))?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        // Optional features, asked for where the adapter has them.
        let required_features = adapter.features() & (wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY);
        let shader_f16 = required_features.contains(wgpu::Features::SHADER_F16);
        let timestamps = required_features.contains(wgpu::Features::TIMESTAMP_QUERY);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("medrank"),
                required_features,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| Error::model(format!("gpu: could not open the device: {e}")))?;
        let adapter = AdapterSummary {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
            // wgpu does not expose WebGPU's `isFallbackAdapter`; a CPU device type is what
            // it means in practice (lavapipe, SwiftShader, WARP).
            is_fallback: info.device_type == wgpu::DeviceType::Cpu,
            shader_f16,
            timestamps,
        };
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        device.set_device_lost_callback(move |_, _| flag.store(true, Ordering::Relaxed));
        Ok(GpuContext { device, queue, limits, adapter, pipelines: Default::default(), lost })
    }

    /// Whether the device was lost: nothing more runs on it.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// How many kernels this device has compiled (each source once, however many encoders
    /// and trainers use it).
    pub fn compiled_kernels(&self) -> usize {
        self.pipelines.lock().map(|p| p.len()).unwrap_or_else(|poisoned| poisoned.into_inner().len())
    }

    /// The largest buffer one storage binding may cover, in bytes.
    pub fn max_binding_bytes(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size)
    }

    /// A storage tensor holding `data` (f32).
    pub fn upload_f32(&self, label: &str, data: &[f32], shape: &[usize]) -> Result<GpuTensor> {
        self.upload(label, bytemuck::cast_slice(data), data.len(), shape, DType::F32)
    }

    /// A storage tensor holding `data` rounded to f16 (weights on adapters with
    /// `shader-f16`). An odd length is padded with one zero: bindings are 4-byte multiples.
    pub fn upload_f16(&self, label: &str, data: &[f32], shape: &[usize]) -> Result<GpuTensor> {
        if !self.adapter.shader_f16 {
            return Err(Error::model(format!("gpu: {} has no shader-f16", self.adapter.name)));
        }
        let mut halves: Vec<half::f16> = data.iter().map(|&v| half::f16::from_f32(v)).collect();
        if halves.len() % 2 == 1 {
            halves.push(half::f16::ZERO);
        }
        let expected: usize = shape.iter().product();
        if expected != data.len() {
            return Err(Error::invalid(format!(
                "gpu: `{label}` has {} values but shape {shape:?} needs {expected}",
                data.len()
            )));
        }
        let mut t = self.upload(label, bytemuck::cast_slice(&halves), halves.len(), &[halves.len()], DType::F16)?;
        t.shape = shape.to_vec();
        Ok(t)
    }

    /// A storage tensor holding `data` (u32: token ids, ...).
    pub fn upload_u32(&self, label: &str, data: &[u32], shape: &[usize]) -> Result<GpuTensor> {
        self.upload(label, bytemuck::cast_slice(data), data.len(), shape, DType::U32)
    }

    fn upload(&self, label: &str, bytes: &[u8], len: usize, shape: &[usize], dtype: DType) -> Result<GpuTensor> {
        let expected: usize = shape.iter().product();
        if expected != len {
            return Err(Error::invalid(format!(
                "gpu: `{label}` has {len} values but shape {shape:?} needs {expected}"
            )));
        }
        self.check_fits(label, bytes.len() as u64)?;
        // wgpu rejects empty bindings: keep at least one element.
        let padded;
        let contents = if bytes.is_empty() {
            padded = [0u8; 4];
            &padded[..]
        } else {
            bytes
        };
        let buffer = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        });
        Ok(GpuTensor { buffer, shape: shape.to_vec(), dtype })
    }

    /// An uninitialised (zeroed by wgpu) f32 storage tensor, e.g. for activations.
    pub fn zeros_f32(&self, label: &str, shape: &[usize]) -> Result<GpuTensor> {
        let len: usize = shape.iter().product();
        let bytes = (len.max(1) * 4) as u64;
        self.check_fits(label, bytes)?;
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(GpuTensor { buffer, shape: shape.to_vec(), dtype: DType::F32 })
    }

    fn check_fits(&self, label: &str, bytes: u64) -> Result<()> {
        if bytes > self.max_binding_bytes() {
            return Err(Error::model(format!(
                "gpu: `{label}` needs {bytes} bytes but one binding may hold at most {} on {}; \
                 split it (see `upload_table`)",
                self.max_binding_bytes(),
                self.adapter.name
            )));
        }
        Ok(())
    }

    /// Uploads a row-major [rows, cols] table in as few row blocks as the binding limit
    /// allows (one block when it fits).
    pub fn upload_table(&self, label: &str, data: &[f32], rows: usize, cols: usize) -> Result<ChunkedTable> {
        self.upload_table_in_blocks(label, data, rows, cols, self.max_binding_bytes())
    }

    /// [`Self::upload_table`] with blocks of at most `max_block_bytes` (tests use a small
    /// value to exercise the split on adapters whose binding limit is large).
    pub fn upload_table_in_blocks(
        &self,
        label: &str,
        data: &[f32],
        rows: usize,
        cols: usize,
        max_block_bytes: u64,
    ) -> Result<ChunkedTable> {
        if data.len() != rows * cols {
            return Err(Error::invalid(format!(
                "gpu: table `{label}` has {} values, expected {rows} x {cols}",
                data.len()
            )));
        }
        let mut chunks = Vec::new();
        for range in row_chunks(rows, cols * 4, max_block_bytes.min(self.max_binding_bytes()))? {
            let block = &data[range.start * cols..range.end * cols];
            let name = format!("{label}[{}..{}]", range.start, range.end);
            chunks.push((range.start, self.upload_f32(&name, block, &[range.len(), cols])?));
        }
        Ok(ChunkedTable { chunks, rows, cols })
    }

    /// Copies a tensor back to the host. Natively this drives the device until the copy is
    /// done; in the browser it awaits the map callback, which fires once control returns
    /// to the event loop (blocking there would deadlock).
    pub async fn read_f32(&self, tensor: &GpuTensor) -> Result<Vec<f32>> {
        if tensor.dtype != DType::F32 {
            return Err(Error::invalid("gpu: read_f32 on a non-f32 tensor"));
        }
        self.read_values(&tensor.buffer, tensor.len()).await
    }

    /// Copies the first `count` values of a buffer (with `COPY_SRC`) back to the host.
    pub async fn read_values<T: bytemuck::Pod>(&self, buffer: &wgpu::Buffer, count: usize) -> Result<Vec<T>> {
        let bytes = (count * std::mem::size_of::<T>()) as u64;
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let staging = self.readback_buffer(bytes);
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
        self.queue.submit([encoder.finish()]);
        self.map_values(&staging, count).await
    }

    /// A host-readable buffer of `bytes` bytes that copies can target.
    pub fn readback_buffer(&self, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// The first `count` values of a [`Self::readback_buffer`] once the submitted work that
    /// fills it is done; the buffer is unmapped again, ready for the next copy.
    pub async fn map_values<T: bytemuck::Pod>(&self, staging: &wgpu::Buffer, count: usize) -> Result<Vec<T>> {
        let bytes = (count * std::mem::size_of::<T>()) as u64;
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let (sender, receiver) = futures_channel::oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, ..bytes, move |result| {
            let _ = sender.send(result);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::model(format!("gpu: waiting for the device failed: {e}")))?;
        receiver
            .await
            .map_err(|_| Error::model("gpu: the device was lost before the readback finished"))?
            .map_err(|e| Error::model(format!("gpu: mapping the readback buffer failed: {e}")))?;
        let values = {
            let view = staging
                .get_mapped_range(..bytes)
                .map_err(|e| Error::model(format!("gpu: reading the mapped buffer: {e}")))?;
            bytemuck::cast_slice::<u8, T>(&view).to_vec()
        };
        staging.unmap();
        Ok(values)
    }

    /// Blocks until an adapter is found and the device opened (native only: tests, CLI).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking() -> Result<Self> {
        pollster::block_on(Self::new())
    }

    /// Blocking [`Self::read_f32`] (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_f32_blocking(&self, tensor: &GpuTensor) -> Result<Vec<f32>> {
        pollster::block_on(self.read_f32(tensor))
    }
}

/// Splits `rows` rows of `row_bytes` each into consecutive ranges of at most `max_bytes`.
/// Errors when a single row is already too large (no split could help).
pub fn row_chunks(rows: usize, row_bytes: usize, max_bytes: u64) -> Result<Vec<Range<usize>>> {
    if row_bytes as u64 > max_bytes {
        return Err(Error::model(format!(
            "gpu: one row of {row_bytes} bytes exceeds the binding limit of {max_bytes} bytes"
        )));
    }
    if rows == 0 {
        let none = 0..0; // one empty chunk: the caller still binds a (placeholder) buffer
        return Ok(vec![none]);
    }
    let per_chunk = ((max_bytes / row_bytes.max(1) as u64) as usize).max(1);
    Ok((0..rows).step_by(per_chunk).map(|s| s..(s + per_chunk).min(rows)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_chunks_cover_every_row_once_within_the_limit() {
        // 250,002 rows x 384 f32 (XLM-R-sized vocabulary) under a 128 MiB binding:
        // 1536 bytes a row -> 87381 rows a chunk -> 3 chunks.
        let chunks = row_chunks(250_002, 384 * 4, 128 << 20).unwrap();
        assert_eq!(chunks, vec![0..87381, 87381..174762, 174762..250_002]);
        // Exactly divisible and a single chunk.
        assert_eq!(row_chunks(10, 4, 20).unwrap(), vec![0..5, 5..10]);
        assert_eq!(row_chunks(3, 4, 1 << 20).unwrap(), vec![0..3]);
        // A row larger than the limit cannot be split by rows.
        assert!(row_chunks(3, 64, 32).is_err());
    }
}
