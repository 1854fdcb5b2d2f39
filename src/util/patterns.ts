/** `text` with every regular-expression metacharacter escaped, so a pattern matches it literally. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

const compiled = new Map<string, RegExp>();
const maxCompiled = 10_000;

/**
 * One compiled RegExp per source and flags, for patterns built from data (skill keywords, tool names) that
 * a chat turn tests again on every turn. The instance is shared: use it with `test`/`exec` only without the
 * `g` or `y` flag, and with `g` only in `String.replace` (which starts at 0 and leaves `lastIndex` at 0).
 * Past `maxCompiled` distinct patterns the cache starts over.
 */
export function compiledPattern(source: string, flags = ''): RegExp {
  const key = `${flags}/${source}`;
  let pattern = compiled.get(key);
  if (!pattern) {
    pattern = new RegExp(source, flags);
    if (compiled.size >= maxCompiled) compiled.clear();
    compiled.set(key, pattern);
  }
  return pattern;
}
