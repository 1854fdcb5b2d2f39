import { defineTool } from 'agentd';
import { z } from 'zod';

/**
 * Custom tools. The same module serves a program (`createRuntime({ tools })`) and `agentd serve`, which
 * imports the compiled `tools.js` when agentd.yaml names it under `tools.modules`.
 */
export const tools = [
  defineTool({
    name: 'word_count',
    description: 'Counts the words of a text.',
    input: z.object({ text: z.string().describe('the text to count') }),
    execute: async ({ text }) => `${text.split(/\s+/).filter(Boolean).length} words`,
  }),
];
