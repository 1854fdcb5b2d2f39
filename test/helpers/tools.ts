import { z } from 'zod';
import { defineTool } from '../../src/tools/index.js';

/** A tool whose input schema throws while it validates: the pipeline itself fails, not the tool. */
export function brittleTool() {
  return defineTool({
    name: 'brittle',
    description: 'its schema throws',
    input: z.object({}).superRefine(() => {
      throw new Error('schema exploded');
    }),
    execute: async () => 'never',
  });
}
