// A stand-in Hugging Face Hub on 127.0.0.1 for the browser tests, so no test reaches the real
// one. It speaks the Hub's URL layout as medrank (the page and the CLI alike) uses it, like
// the Rust stand-in of the native tests (tests/integration/common/hub.rs):
// - `GET /api/models/{ORG/NAME}/revision/{REV}?blobs=true`: the commit (`sha`) and
//   `siblings` with sizes, git blob ids and, for weights, the LFS sha256; an unknown model
//   404s with the Hub's `X-Error-Code: RepoNotFound`;
// - `GET /{ORG/NAME}/resolve/{REV}/{FILE}`: small files from here with `ETag` and
//   `X-Repo-Commit`; weights (LFS) redirected, as the Hub redirects them to its CDN, to a
//   second server on another port of 127.0.0.1.
// Both answer with CORS headers (the Hub's: `Access-Control-Allow-Origin: *`, its headers
// exposed), since the page fetches from its own origin. Faults per file: `wrong-sha256` (the
// listing publishes another digest than the bytes served have), `404`, and `truncated` (the
// CDN announces the whole length, sends the first half and closes the connection). Every request is
// logged: which server, the method, the URL, the bytes of its body.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
/** Git's blob id: sha1 of `blob {size}\0` and the bytes (what the Hub lists as `blobId`). */
const blobId = (bytes) => createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
const isLfs = (path) => path.endsWith('.safetensors') || path.endsWith('.bin');

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'X-Repo-Commit, ETag, X-Error-Code, X-Error-Message, Content-Length',
  'Cross-Origin-Resource-Policy': 'cross-origin',
};

/** Starts the Hub and its CDN; resolves to {url, cdn, publish, fault, requests, stop}. */
export async function startStandInHub() {
  const repos = new Map(); // ORG/NAME -> {refs: Map(rev -> commit), commits: Map(commit -> Map(path -> bytes))}
  const faults = new Map(); // `ORG/NAME/PATH` -> 'wrong-sha256' | '404' | 'truncated'
  const requests = [];
  const log = (server) => (request) => {
    let body = 0;
    request.on('data', (chunk) => (body += chunk.length));
    request.on('end', () => requests.push({ server, method: request.method, url: request.url, body }));
  };

  const reply = (response, status, headers = {}, body = '') => {
    response.writeHead(status, { ...CORS, ...headers });
    response.end(body);
  };
  const notFound = (response, code, message) =>
    reply(response, 404, { 'X-Error-Code': code, 'X-Error-Message': message, 'Content-Type': 'text/plain' }, message);

  const blobs = new Map(); // sha256 -> bytes (the CDN's store)
  const truncated = new Set(); // sha256s the CDN breaks off halfway
  const cdn = createServer((request, response) => {
    log('cdn')(request);
    const digest = decodeURIComponent(new URL(request.url, 'http://x').pathname.replace(/^\/blobs\//, ''));
    const bytes = blobs.get(digest);
    if (!bytes) return reply(response, 404, {}, 'no such blob');
    const headers = { 'Content-Type': 'application/octet-stream', 'Content-Length': bytes.length, ETag: `"${digest}"` };
    if (!truncated.has(digest)) return reply(response, 200, headers, bytes);
    // The whole length announced, half of it sent, then the connection closed.
    response.writeHead(200, { ...CORS, ...headers });
    response.write(bytes.subarray(0, bytes.length >> 1), () => response.socket.destroy());
  });

  const hub = createServer((request, response) => {
    log('hub')(request);
    const url = new URL(request.url, 'http://x');
    const path = decodeURIComponent(url.pathname);
    const listing = path.match(/^\/api\/models\/([^/]+\/[^/]+)\/revision\/(.+)$/);
    if (listing) {
      const [, repo, rev] = listing;
      const known = repos.get(repo);
      if (!known) return notFound(response, 'RepoNotFound', 'Repository not found');
      const commit = known.refs.get(rev) ?? (known.commits.has(rev) ? rev : null);
      if (!commit) return notFound(response, 'RevisionNotFound', 'Invalid rev id');
      const siblings = [...known.commits.get(commit)].map(([file, bytes]) => {
        const sibling = { rfilename: file, size: bytes.length, blobId: blobId(bytes) };
        if (isLfs(file)) {
          const published = faults.get(`${repo}/${file}`) === 'wrong-sha256' ? sha256(Buffer.from('other bytes')) : sha256(bytes);
          sibling.lfs = { sha256: published, size: bytes.length, pointerSize: 134 };
        }
        return sibling;
      });
      const body = JSON.stringify({ id: repo, sha: commit, gated: false, siblings });
      return reply(response, 200, { 'Content-Type': 'application/json' }, body);
    }
    const resolve = path.match(/^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/);
    if (resolve) {
      const [, repo, rev, file] = resolve;
      const known = repos.get(repo);
      const commit = known && (known.refs.get(rev) ?? (known.commits.has(rev) ? rev : null));
      const bytes = commit && known.commits.get(commit).get(file);
      if (!bytes || faults.get(`${repo}/${file}`) === '404') return notFound(response, 'EntryNotFound', 'Entry not found');
      const headers = { 'X-Repo-Commit': commit };
      if (isLfs(file)) {
        blobs.set(sha256(bytes), bytes);
        if (faults.get(`${repo}/${file}`) === 'truncated') truncated.add(sha256(bytes));
        const location = `http://127.0.0.1:${cdn.address().port}/blobs/${sha256(bytes)}`;
        return reply(response, 302, { ...headers, Location: location, ETag: `"${sha256(bytes)}"` });
      }
      return reply(response, 200, { ...headers, ETag: `"${blobId(bytes)}"`, 'Content-Length': bytes.length }, bytes);
    }
    reply(response, 404, {}, 'not a Hub URL');
  });

  await Promise.all([hub, cdn].map((s) => new Promise((resolve) => s.listen(0, '127.0.0.1', resolve))));
  return {
    url: `http://127.0.0.1:${hub.address().port}`,
    cdn: `http://127.0.0.1:${cdn.address().port}`,
    requests,
    /** Publishes `files` ({path: Buffer}) as a new commit of `repo` on `branch`; its id. */
    publish(repo, branch, files) {
      const known = repos.get(repo) ?? { refs: new Map(), commits: new Map() };
      repos.set(repo, known);
      const hash = createHash('sha1').update(`${repo} ${branch} ${known.commits.size}`);
      for (const [path, bytes] of Object.entries(files).sort()) hash.update(path).update(bytes);
      const commit = hash.digest('hex');
      known.commits.set(commit, new Map(Object.entries(files)));
      known.refs.set(branch, commit);
      return commit;
    },
    fault(repo, path, kind) {
      faults.set(`${repo}/${path}`, kind);
    },
    /** Stops both servers: from then on a request to them finds no one listening. */
    stop: () =>
      Promise.all(
        [hub, cdn].map((s) => {
          const closed = new Promise((resolve) => s.close(resolve));
          s.closeAllConnections();
          return closed;
        }),
      ),
  };
}
