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

/**
 * `literalPattern(around, literal, flags).exec(text)` after a substring scan that rules out most texts: the
 * pattern cannot match where the literal does not occur. Case-insensitive (`i` without `u`), the scan looks
 * for the literal in lower case in `lowerText` (`text.toLowerCase()`; a caller testing many literals against
 * one text passes it once), and only for an ASCII literal: that case folding maps no other character onto
 * ASCII, while `toLowerCase` may. With `i` and `u` together the pattern alone decides.
 */
export function execLiteral(
  around: PatternAround,
  literal: string,
  text: string,
  flags = '',
  lowerText?: string,
): RegExpExecArray | null {
  if (!flags.includes('i')) {
    if (!text.includes(literal)) return null;
  } else if (!flags.includes('u') && isAscii(literal)) {
    if (!(lowerText ?? text.toLowerCase()).includes(literal.toLowerCase())) return null;
  }
  return literalPattern(around, literal, flags).exec(text);
}

function isAscii(text: string): boolean {
  for (let index = 0; index < text.length; index++) if (text.charCodeAt(index) > 0x7f) return false;
  return true;
}
