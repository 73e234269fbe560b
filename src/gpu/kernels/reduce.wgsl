// A reduction over the THREADS invocations of a workgroup (THREADS is a constant from the
// Rust side). Every invocation passes its value and gets the result, so every invocation
// must call it (it holds barriers). `take_max`: the maximum; otherwise the sum.

var<workgroup> partial: array<f32, THREADS>;

fn workgroup_reduce(lid: u32, v: f32, take_max: bool) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            let a = partial[lid];
            let b = partial[lid + stride];
            partial[lid] = select(a + b, max(a, b), take_max);
        }
        workgroupBarrier();
    }
    let r = partial[0];
    workgroupBarrier();
    return r;
}
