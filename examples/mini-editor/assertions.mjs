// Custom evaluation assertions (evaluations.yaml, type: custom).

/** The summary reports a positive word count. */
export function hasWords({ output }) {
  const length = output && typeof output === 'object' ? output.length : undefined;
  return { pass: typeof length === 'number' && length > 0, message: `length is ${JSON.stringify(length)}` };
}
