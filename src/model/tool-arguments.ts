/**
 * Tool-call arguments as the model sent them (a JSON text assembled from stream fragments) → an object.
 * Anything that is not a JSON object is kept as `{ __raw }` so the tool layer can report it to the model
 * instead of the stream failing; the tool layer validates the object against the tool's schema.
 */
export function parseToolArguments(text: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      return value as Record<string, unknown>;
  } catch {
    // Falls through to the raw form.
  }
  return { __raw: text };
}
