/** A run of a markdown file from one heading (or the file start) up to the next heading. */
export interface MarkdownSection {
  /** Normalized heading used for precedence: lower case, single spaces; `__preamble__` before any heading. */
  key: string;
  /** The heading text as written (empty for the preamble). */
  heading: string;
  /** The section's lines, heading line included, trailing blank lines removed. */
  text: string;
}

export const preambleKey = '__preamble__';

const headingPattern = /^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$/;
const fencePattern = /^ {0,3}(`{3,}|~{3,})/;

/** Line endings to LF, BOM removed. */
export function normalizeMarkdown(text: string): string {
  return text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
}

/**
 * Splits markdown at ATX headings of any level. Headings inside fenced code blocks do not split. Text
 * before the first heading is the preamble section (dropped when blank).
 */
export function splitSections(markdown: string): MarkdownSection[] {
  const sections: MarkdownSection[] = [];
  let current: { key: string; heading: string; lines: string[] } = {
    key: preambleKey,
    heading: '',
    lines: [],
  };
  let fence: string | undefined;
  const flush = () => {
    const lines = [...current.lines];
    while (lines.length > 0 && lines[lines.length - 1]!.trim() === '') lines.pop();
    while (current.key === preambleKey && lines.length > 0 && lines[0]!.trim() === '') lines.shift();
    if (lines.length > 0)
      sections.push({ key: current.key, heading: current.heading, text: lines.join('\n') });
  };
  for (const line of normalizeMarkdown(markdown).split('\n')) {
    const fenceMatch = fencePattern.exec(line);
    if (fenceMatch) {
      const marker = fenceMatch[1]!;
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
    }
    const headingMatch = fence === undefined && !fenceMatch ? headingPattern.exec(line) : null;
    if (headingMatch) {
      flush();
      const heading = headingMatch[2]!.trim();
      current = { key: heading.toLowerCase().replace(/\s+/g, ' '), heading, lines: [line.trimEnd()] };
    } else {
      current.lines.push(line.trimEnd());
    }
  }
  flush();
  return sections;
}
