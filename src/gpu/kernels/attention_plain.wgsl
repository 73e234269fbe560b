// attention.wgsl's `relative` for a model without relative positions: nothing to add.
fn relative(q0: mat4x4<f32>, q1: mat4x4<f32>, q2: mat4x4<f32>, q3: mat4x4<f32>,
            query: u32, key: u32, head: u32, at: u32) -> f32 {
    return 0.0;
}
