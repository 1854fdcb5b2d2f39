import { describe, expect, it } from 'vitest';
import { createContextWindow } from '../../src/engage/index.js';
import { estimateTokens, type ModelMessage } from '../../src/model/index.js';

// measure() keeps a running total instead of rendering; it must always agree with render().
describe('context window measure', () => {
  for (const truncateClosedBlocks of [true, false]) {
    it(`matches the rendered context after every change (truncateClosedBlocks: ${truncateClosedBlocks})`, () => {
      const window = createContextWindow({
        system: 'You are a test agent.',
        systemExtras: ['extra context'],
        history: [
          { role: 'user', content: 'earlier question' },
          { role: 'assistant', content: 'earlier answer' },
          { role: 'user', content: 'the task at hand' },
        ],
        truncateClosedBlocks,
      });
      const agrees = () => {
        const rendered = window.render();
        expect(window.measure()).toEqual({ tokens: estimateTokens(rendered), messages: rendered.length });
      };
      agrees();
      const call: ModelMessage = {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'c1', name: 'ledger_append', arguments: { entry_type: 'step', content: 'read it' } },
        ],
      };
      const result: ModelMessage = {
        role: 'tool',
        content: 'ok',
        toolCallId: 'c1',
        toolName: 'ledger_append',
      };
      expect(window.appendTurn([call, result], [])).toBe(false);
      agrees();
      window.appendNote('a note for the model');
      agrees();
      window.setSkill('review', 'Check every change twice.');
      agrees();
      expect(
        window.appendTurn(
          [call, result],
          [{ seq: 1, content: 'read the file' }],
          [{ seq: 2, entryType: 'finding', content: 'the file is short' }],
        ),
      ).toBe(true);
      agrees();
      window.appendTurn([{ role: 'assistant', content: 'working' }], []);
      agrees();
      window.rebuild(
        [{ role: 'user', content: 'summary of before' }],
        [{ role: 'assistant', content: 'tail' }],
      );
      agrees();
      window.appendNote('after the rebuild');
      agrees();
    });
  }
});
