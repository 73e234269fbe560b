// Small DOM helpers shared by the page's modules.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) if (c != null) node.append(c);
  return node;
}
/** "file:line: field `x`: message", with the place in bold so a user finds it. */
export function formatError(e) {
  const frag = document.createDocumentFragment();
  const loc = e?.location;
  if (loc) {
    let where = loc.file || '';
    if (loc.line != null) where += `, line ${loc.line}`;
    if (loc.field) where += `, field “${loc.field}”`;
    frag.append(el('strong', { class: 'where' }, where), ': ');
  }
  frag.append(e?.message ?? String(e));
  // The engine's own words behind a sentence said for people (page::error_reply's detail).
  if (e?.detail) frag.append(' ', el('details', { class: 'detail' }, el('summary', {}, 'Technical detail'), e.detail));
  return frag;
}

/** Save text as a file through a temporary blob URL (nothing leaves the machine). */
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
