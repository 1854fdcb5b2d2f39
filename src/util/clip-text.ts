/** `text` cut to at most `maxChars`, its last character an ellipsis where it was cut. */
export function clipText(text: string, maxChars: number): string {
  return text.length > maxChars ? `${text.slice(0, maxChars - 1)}…` : text;
}
