// Random BERT model folders for the browser tests: config.json, model.safetensors (seeded
// weights, Hugging Face's tensor names) and the default model's tokenizer.json, written
// here because no model hub is reachable and a base-size checkpoint is not vendored. The
// safetensors layout (an 8-byte little-endian header length, a JSON header of dtype, shape
// and byte offsets, then the raw little-endian data) is the format's own, from its
// specification (github.com/huggingface/safetensors, "Format").
import { closeSync, copyFileSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** mulberry32: a small seeded generator (uniform in [0, 1)). */
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Writes a BERT folder to `dir`: `layers` layers of `hidden` (heads of 64 values at most,
 * `intermediate` = 4 x hidden unless given), the tokenizer's 30522-word vocabulary, 512
 * positions, 2 token types, a pooler. Weights uniform in +-`scale` (norms 1 and 0), from
 * `seed`. With `labels`, a sequence-classification head over them (`classifier`, and
 * `id2label` in the config). `scaled` maps tensor names to a factor their random values
 * are multiplied by (a hostile model: finite weights of 1e24 that make it compute NaN). Returns the
 * three file paths (what the page's model picker takes).
 */
export function writeRandomBert(
  dir,
  tokenizerJson,
  { layers, hidden, heads, intermediate = 4 * hidden, seed = 1, scale = 0.05, labels = null, scaled = {} },
) {
  mkdirSync(dir, { recursive: true });
  const vocab = 30522;
  const positions = 512;
  const config = {
    architectures: ['BertModel'],
    model_type: 'bert',
    hidden_act: 'gelu',
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_attention_heads: heads,
    num_hidden_layers: layers,
    max_position_embeddings: positions,
    type_vocab_size: 2,
    vocab_size: vocab,
    layer_norm_eps: 1e-12,
    pad_token_id: 0,
  };
  if (labels) {
    config.architectures = ['BertForSequenceClassification'];
    config.id2label = Object.fromEntries(labels.map((l, i) => [String(i), l]));
  }
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2));
  copyFileSync(tokenizerJson, join(dir, 'tokenizer.json'));

  // (name, shape, kind): random, ones or zeros.
  const tensors = [];
  const dense = (name, out, inp) =>
    tensors.push([`${name}.weight`, [out, inp], 'random'], [`${name}.bias`, [out], 'random']);
  const norm = (name) => tensors.push([`${name}.weight`, [hidden], 'ones'], [`${name}.bias`, [hidden], 'zeros']);
  tensors.push(['embeddings.word_embeddings.weight', [vocab, hidden], 'random']);
  tensors.push(['embeddings.position_embeddings.weight', [positions, hidden], 'random']);
  tensors.push(['embeddings.token_type_embeddings.weight', [2, hidden], 'random']);
  norm('embeddings.LayerNorm');
  for (let l = 0; l < layers; l++) {
    const p = `encoder.layer.${l}`;
    for (const part of ['query', 'key', 'value']) dense(`${p}.attention.self.${part}`, hidden, hidden);
    dense(`${p}.attention.output.dense`, hidden, hidden);
    norm(`${p}.attention.output.LayerNorm`);
    dense(`${p}.intermediate.dense`, intermediate, hidden);
    dense(`${p}.output.dense`, hidden, intermediate);
    norm(`${p}.output.LayerNorm`);
  }
  dense('pooler.dense', hidden, hidden);
  if (labels) dense('classifier', labels.length, hidden);

  const header = {};
  let offset = 0;
  for (const [name, shape] of tensors) {
    const bytes = 4 * shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8); // the data starts 8-byte aligned
  const file = join(dir, 'model.safetensors');
  const fd = openSync(file, 'w');
  try {
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(json.length));
    writeSync(fd, length);
    writeSync(fd, Buffer.from(json, 'utf8'));
    const next = generator(seed);
    for (const [name, shape, kind] of tensors) {
      // Written in blocks: a base-size word table alone is 94 MB.
      let left = shape.reduce((a, b) => a * b, 1);
      while (left > 0) {
        const n = Math.min(left, 1 << 20);
        const block = new Float32Array(n);
        if (kind === 'ones') block.fill(1);
        else if (kind === 'random') {
          const factor = scale * (scaled[name] ?? 1);
          for (let i = 0; i < n; i++) block[i] = (2 * next() - 1) * factor;
        }
        writeSync(fd, new Uint8Array(block.buffer));
        left -= n;
      }
    }
  } finally {
    closeSync(fd);
  }
  return ['config.json', 'tokenizer.json', 'model.safetensors'].map((f) => join(dir, f));
}
