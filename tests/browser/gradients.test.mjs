// The GPU trainer's backward kernels and loss on WebGPU in Chromium (SwiftShader here),
// through the bench page's check: every trained tensor of tiny random BERT (multiple
// choice and classification), RoBERTa and DistilBERT models, training the top layers and
// then every layer with the embeddings (and BERT multiple choice and RoBERTa again with
// dropout, the kernels drawing the CPU trainer's masks), its gradient after one
// micro-batch against candle's autograd computed in the same wasm module on the CPU,
// relative difference <= 1e-3 per tensor (`train::gpu::gradient_check`, which
// tests/integration/gpu_train.rs runs natively on lavapipe).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openApp } from './harness.mjs';

test('the GPU trainer’s gradients on WebGPU match candle’s autograd within 1e-3 per tensor', async () => {
  const app = await openApp({ webgpu: true });
  try {
    const { page } = app;
    await page.goto(new URL('bench.html', app.server.url).href);
    await page.click('#gradcheck-run');
    await page.waitForFunction(
      () => window.__gradientCheck || !document.querySelector('#gradcheck-error').hidden,
      null,
      { timeout: 600000 },
    );
    const error = await page.$eval('#gradcheck-error', (e) => (e.hidden ? null : e.textContent));
    assert.equal(error, null);
    const { adapter, checks } = await page.evaluate(() => window.__gradientCheck);
    // Top layers: 4 models x (whole, in parts) x (the losses + 2 layers of 16 tensors + 4 head
    // tensors). Every layer: 3 layers, and the word, position and token-type tables and the
    // embedding norm's two (DistilBERT has no token types).
    const top = 4 * 2 * (1 + 2 * 16 + 4);
    const every = 2 * (3 * (1 + 3 * 16 + 4 + 5) + (1 + 3 * 16 + 4 + 4));
    // With dropout: 2 models (both with token types) x (whole, in parts), both ways.
    const dropping = 2 * 2 * (1 + 2 * 16 + 4) + 2 * 2 * (1 + 3 * 16 + 4 + 5);
    assert.equal(checks.length, top + every + dropping, adapter.name);
    assert.equal(checks.filter((c) => c.case.includes(', dropout')).length, dropping);
    assert.equal(checks.filter((c) => c.tensor === 'word_embeddings' && !c.zero_by_construction).length, 8 + 4);
    for (const c of checks) {
      assert.ok(c.ok, JSON.stringify(c));
      if (!c.zero_by_construction) assert.ok(c.difference <= 1e-3 && c.reference_norm > 1e-7, JSON.stringify(c));
      else assert.ok(c.difference < 1e-6, JSON.stringify(c));
    }
    assert.match(await page.textContent('#gradcheck-summary'), /1138 of 1138 checks within the limit/);
  } finally {
    await app.close();
  }
});
