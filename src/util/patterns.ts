/** `text` with every regular-expression metacharacter escaped, so a pattern matches it literally. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Builds a pattern's source around a literal that `escapeRegExp` has already escaped. */
export type PatternAround = (escaped: string) => string;

const compiled = new WeakMap<PatternAround, Map<string, RegExp>>();
const maxCompiledPerShape = 10_000;

/**
 * One compiled RegExp per shape, literal and flags, for patterns built from data (skill keywords, tool
 * names) that a chat turn tests again on every turn: a repeated call costs two map lookups, not escaping
 * the literal and building the source again. `around` must be a module-level function (it is the shape's
 * key). The instance is shared: use it with `test`/`exec` only without the `g` or `y` flag, and with `g`
 * only in `String.replace` (which starts at 0 and leaves `lastIndex` at 0). Past `maxCompiledPerShape`
 * literals a shape's cache starts over.
 */
export function literalPattern(around: PatternAround, literal: string, flags = ''): RegExp {
  let byLiteral = compiled.get(around);
  if (!byLiteral) {
    byLiteral = new Map();
    compiled.set(around, byLiteral);
  }
  const key = `${flags}/${literal}`;
  let pattern = byLiteral.get(key);
  if (!pattern) {
    pattern = new RegExp(around(escapeRegExp(literal)), flags);
    if (byLiteral.size >= maxCompiledPerShape) byLiteral.clear();
    byLiteral.set(key, pattern);
  }
  return pattern;
}
