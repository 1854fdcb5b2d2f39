import type { ChatTurnInput } from '../../src/chat/index.js';
import type { EngageResult } from '../../src/engage/index.js';

/** A chat `runTurn` that answers "answer" at once, through `beforeFinish` as the engage loop does. */
export async function answerTurn(input: ChatTurnInput): Promise<EngageResult> {
  const result: EngageResult = {
    status: 'completed',
    text: 'answer',
    newMessages: [{ role: 'assistant', content: 'answer' }],
    usage: { inputTokens: 1, outputTokens: 1 },
    turns: 1,
    activeSkills: [],
    compactions: 0,
  };
  await input.beforeFinish(result);
  return result;
}
