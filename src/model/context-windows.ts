/** Context windows (tokens) by model-id prefix, most specific first. Sources: the providers' model pages. */
const contextWindowTable: ReadonlyArray<readonly [prefix: string, tokens: number]> = [
  ['gpt-4.1', 1_047_576],
  ['gpt-5', 400_000],
  ['gpt-4o', 128_000],
  ['gpt-4-turbo', 128_000],
  ['gpt-4', 8_192],
  ['gpt-3.5-turbo', 16_385],
  ['o1', 200_000],
  ['o3', 200_000],
  ['o4', 200_000],
  ['claude', 200_000],
  ['gemini', 1_048_576],
  ['llama3', 128_000],
  ['llama-3', 128_000],
  ['qwen', 32_768],
  ['mistral', 32_768],
  ['agentd-local', 32_768],
];

export const defaultContextWindowTokens = 128_000;

/**
 * The context window of a model id (`gpt-4o-mini`, `claude-sonnet-4-5`, `llama3.2:3b`, or with a
 * vendor prefix such as `openai/gpt-4o` as OpenRouter names them). Unknown models get 128k.
 */
export function contextWindowFor(modelId: string): number {
  const name = modelId.toLowerCase().slice(modelId.lastIndexOf('/') + 1);
  for (const [prefix, tokens] of contextWindowTable) if (name.startsWith(prefix)) return tokens;
  return defaultContextWindowTokens;
}
