/**
 * A number as `JSON.stringify` writes it (NaN and the infinities as null): for JSON written as text, field by
 * field, where a hot path skips building the object and the serializer's walk over it.
 */
export function numberJson(value: number): string {
  return Number.isFinite(value) ? `${value}` : 'null';
}
