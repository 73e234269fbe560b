// The benchmark page's peer: onnxruntime-web (the npm package, copied into the site's own
// `peer/` folder by `scripts/build-web.sh --bench-peer`, never loaded by the main page) running
// the same all-MiniLM-L6-v2 weights — the ONNX graph `tests/reference/minilm_onnx.py --export`
// builds from the safetensors, the one the native bench runs in ONNX Runtime — on the wasm
// CPU with the same thread count as medrank, timed as medrank's bench times itself: one
// untimed warm-up pass, then passes until `minSeconds` (at most 100), mean per pass. With
// `int8`, the int8 graph (`minilm_onnx.py --export --int8`, `peer/minilm-int8.onnx`) too when
// the bench build has it, beside medrank's int8.
//
// Messages in: {type: 'bench', id, cells: [[seq_len, batch], ...], threads, minSeconds, int8};
// out: 'progress', 'result' ({result: {device, threads, rows}, int8: the same or null}), 'error'.
self.onmessage = async (event) => {
  const msg = event.data;
  try {
    const ort = await import('./peer/ort/ort.wasm.min.mjs');
    ort.env.wasm.numThreads = msg.threads;
    ort.env.wasm.wasmPaths = new URL('./peer/ort/', self.location.href).href;
    const device = `onnxruntime-web ${ort.env.versions?.web ?? ''} (wasm, SIMD)`;
    const result = { device, threads: msg.threads, rows: await timeGraph(ort, 'minilm.onnx', 'ONNX Runtime Web', msg) };
    let int8 = null;
    const int8Graph = new URL('./peer/minilm-int8.onnx', self.location.href).href;
    if (msg.int8 && (await fetch(int8Graph, { method: 'HEAD' })).ok) {
      const rows = await timeGraph(ort, 'minilm-int8.onnx', 'ONNX Runtime Web int8', msg);
      int8 = { device: `${device}, int8 graph`, threads: msg.threads, rows };
    }
    postMessage({ type: 'result', id: msg.id, result, int8 });
  } catch (e) {
    postMessage({ type: 'error', id: msg.id, error: { message: `ONNX Runtime Web could not run: ${e.message || e}` } });
  }
};

/** One graph of `peer/` over the message's cells: its rows as medrank's bench writes them. */
async function timeGraph(ort, graph, name, msg) {
  const session = await ort.InferenceSession.create(new URL(`./peer/${graph}`, self.location.href).href, {
    executionProviders: ['wasm'],
    graphOptimizationLevel: 'all',
  });
  const rows = [];
  for (const [i, [seqLen, batch]] of msg.cells.entries()) {
    postMessage({
      type: 'progress',
      id: msg.id,
      stage: `${name}: length ${seqLen}, batch ${batch}`,
      done: i,
      total: msg.cells.length,
    });
    const n = seqLen * batch;
    // Token ids do not change the work; 1000 + i keeps them inside the vocabulary.
    const ids = BigInt64Array.from({ length: n }, (_, k) => BigInt(1000 + ((k * 7919) % 20000)));
    const feeds = {
      input_ids: new ort.Tensor('int64', ids, [batch, seqLen]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(n).fill(1n), [batch, seqLen]),
    };
    await session.run(feeds); // warm-up
    let passes = 0;
    const start = performance.now();
    while (passes < 100) {
      await session.run(feeds);
      passes += 1;
      if ((performance.now() - start) / 1000 >= msg.minSeconds) break;
    }
    const seconds = (performance.now() - start) / 1000 / passes;
    rows.push({
      seq_len: seqLen,
      batch,
      repeats: passes,
      seconds_per_pass: seconds,
      sequences_per_s: batch / seconds,
      tokens_per_s: n / seconds,
    });
  }
  await session.release?.();
  return rows;
}
