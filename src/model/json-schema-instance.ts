/**
 * Builds a value that satisfies a JSON Schema, taking values from `provided` where property names match.
 * Used by the local model for tool arguments and JSON replies. Supports the subset tools and structured
 * outputs use: type (or a list of types), properties, required, items, minItems, maxItems, enum, const,
 * default, anyOf, oneOf, allOf, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength,
 * maxLength and the formats date-time, date, email and uri. `pattern` and `$ref` are not followed.
 */

type Schema = Record<string, unknown>;

export interface InstanceOptions {
  /** Fill the top-level optional properties too (JSON replies), or only required and provided ones (tool arguments). */
  fillOptional: boolean;
  /** Text for string properties that hold prose (`reply`, `answer`, `summary`, …) when nothing was provided. */
  prose?: string;
}

const proseNames = new Set([
  'reply',
  'answer',
  'response',
  'text',
  'message',
  'content',
  'summary',
  'result',
  'output',
  'explanation',
  'reason',
  'rationale',
  'note',
]);

const maxDepth = 8;

export function instanceForSchema(schema: unknown, provided: unknown, options: InstanceOptions): unknown {
  return fill(schema, provided, options, undefined, 0);
}

/** `firstName`, `first_name` and `First-Name` are the same key. */
export function normalizeKey(key: string): string {
  return key.toLowerCase().replace(/[^a-z0-9]/g, '');
}

function fill(
  schema: unknown,
  provided: unknown,
  options: InstanceOptions,
  name: string | undefined,
  depth: number,
): unknown {
  if (typeof schema !== 'object' || schema === null || depth > maxDepth) return provided ?? null;
  const node = schema as Schema;
  if ('const' in node) return node.const;
  if (Array.isArray(node.enum) && node.enum.length > 0) {
    const match = node.enum.find(
      (candidate) =>
        candidate === provided || String(candidate).toLowerCase() === String(provided ?? '').toLowerCase(),
    );
    if (match !== undefined) return match;
    return provided === undefined && node.default !== undefined ? node.default : node.enum[0];
  }
  if (Array.isArray(node.allOf)) {
    const parts = node.allOf.map((part) => fill(part, provided, options, name, depth + 1));
    return parts.every((part) => typeof part === 'object' && part !== null && !Array.isArray(part))
      ? Object.assign({}, ...parts)
      : parts[0];
  }
  const variants = (node.anyOf ?? node.oneOf) as unknown[] | undefined;
  if (Array.isArray(variants) && variants.length > 0) {
    const usable = variants.filter((variant) => (variant as Schema)?.type !== 'null');
    const chosen = usable.find((variant) => matchesType(variant, provided)) ?? usable[0] ?? variants[0];
    return fill(chosen, provided, options, name, depth + 1);
  }
  if (provided === undefined && node.default !== undefined) return node.default;
  switch (pickType(node, provided)) {
    case 'object':
      return fillObject(node, provided, options, depth);
    case 'array':
      return fillArray(node, provided, options, name, depth);
    case 'string':
      return fillString(node, provided, options, name);
    case 'integer':
      return fillNumber(node, provided, true);
    case 'number':
      return fillNumber(node, provided, false);
    case 'boolean':
      return provided === true || /^(?:true|yes|on|1)$/i.test(String(provided ?? ''));
    case 'null':
      return null;
    default:
      return (
        provided ??
        (options.prose !== undefined && name && proseNames.has(normalizeKey(name)) ? options.prose : null)
      );
  }
}

function pickType(node: Schema, provided: unknown): string | undefined {
  const type = node.type;
  if (typeof type === 'string') return type;
  if (Array.isArray(type)) {
    const types = type.filter((entry): entry is string => typeof entry === 'string');
    return (
      types.find((entry) => matchesType({ type: entry }, provided)) ??
      types.find((entry) => entry !== 'null') ??
      'null'
    );
  }
  if (node.properties) return 'object';
  if (node.items) return 'array';
  return undefined;
}

function matchesType(schema: unknown, value: unknown): boolean {
  if (value === undefined) return false;
  const type = (schema as Schema)?.type;
  switch (type) {
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'number':
    case 'integer':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      return false;
  }
}

function fillObject(
  node: Schema,
  provided: unknown,
  options: InstanceOptions,
  depth: number,
): Record<string, unknown> {
  const properties = (node.properties ?? {}) as Record<string, unknown>;
  const required = new Set(Array.isArray(node.required) ? (node.required as string[]) : []);
  const source =
    typeof provided === 'object' && provided !== null && !Array.isArray(provided) ? (provided as Schema) : {};
  const byKey = new Map(Object.entries(source).map(([key, value]) => [normalizeKey(key), value]));
  const result: Record<string, unknown> = {};
  for (const [key, propertySchema] of Object.entries(properties)) {
    const value = byKey.get(normalizeKey(key));
    // Optional properties nobody provided are filled only at the top: deeper down (array items, nested
    // objects) invented values are more noise than help.
    if (value === undefined && !required.has(key) && !(options.fillOptional && depth === 0)) continue;
    result[key] = fill(propertySchema, value, options, key, depth + 1);
  }
  // Required names without a property schema still have to be present.
  for (const key of required) if (!(key in result)) result[key] = byKey.get(normalizeKey(key)) ?? '';
  // A schema that does not declare properties at all: whatever was provided is the best guess.
  if (node.properties === undefined && node.additionalProperties !== false) Object.assign(result, source);
  return result;
}

function fillArray(
  node: Schema,
  provided: unknown,
  options: InstanceOptions,
  name: string | undefined,
  depth: number,
): unknown[] {
  const minItems = typeof node.minItems === 'number' ? node.minItems : 0;
  const maxItems = typeof node.maxItems === 'number' ? node.maxItems : Number.POSITIVE_INFINITY;
  const source = Array.isArray(provided) ? provided : provided === undefined ? [] : [provided];
  const items = source.slice(0, maxItems).map((item) => fill(node.items, item, options, name, depth + 1));
  while (items.length < minItems) items.push(fill(node.items, undefined, options, name, depth + 1));
  return items;
}

function fillString(
  node: Schema,
  provided: unknown,
  options: InstanceOptions,
  name: string | undefined,
): string {
  let value: string;
  if (typeof provided === 'string') value = provided;
  else if (provided !== undefined && provided !== null && typeof provided !== 'object')
    value = String(provided);
  else if (provided !== undefined && provided !== null) value = JSON.stringify(provided);
  else if (options.prose !== undefined && name && proseNames.has(normalizeKey(name))) value = options.prose;
  else value = formatExample(node.format);
  const minLength = typeof node.minLength === 'number' ? node.minLength : 0;
  const maxLength = typeof node.maxLength === 'number' ? node.maxLength : Number.POSITIVE_INFINITY;
  if (value.length < minLength) value = value.padEnd(minLength, value.length ? ' ' : 'x');
  if (value.length > maxLength) value = value.slice(0, maxLength);
  return value;
}

function formatExample(format: unknown): string {
  switch (format) {
    case 'date-time':
      return '1970-01-01T00:00:00.000Z';
    case 'date':
      return '1970-01-01';
    case 'email':
      return 'user@example.com';
    case 'uri':
    case 'url':
      return 'https://example.com/';
    default:
      return '';
  }
}

function fillNumber(node: Schema, provided: unknown, integer: boolean): number {
  const parsed =
    typeof provided === 'number' ? provided : typeof provided === 'string' ? Number(provided) : Number.NaN;
  let value = Number.isFinite(parsed) ? parsed : 0;
  if (integer) value = Math.round(value);
  const step = integer ? 1 : 1e-6;
  if (typeof node.minimum === 'number') value = Math.max(value, node.minimum);
  if (typeof node.exclusiveMinimum === 'number' && value <= node.exclusiveMinimum)
    value = node.exclusiveMinimum + step;
  if (typeof node.maximum === 'number') value = Math.min(value, node.maximum);
  if (typeof node.exclusiveMaximum === 'number' && value >= node.exclusiveMaximum)
    value = node.exclusiveMaximum - step;
  return integer ? Math.ceil(value) : value;
}
