import { createRuntime, defineAgent, type LanguageModel, loadConfig } from 'agentd';
import { createScriptedModel } from 'agentd/testing';
import { tools } from './tools.js';

// With AGENTD_MODEL (and its provider's key) set a real model answers; without, a scripted model plays the
// model's part so the example runs offline: it calls the tool, then answers with the tool's result.
const model: LanguageModel | undefined = process.env.AGENTD_MODEL
  ? undefined
  : createScriptedModel({
      steps: [
        { toolCalls: [{ name: 'word_count', arguments: { text: 'the quick brown fox' } }] },
        (request) => ({ text: `The text has ${request.messages.at(-1)?.content}.` }),
      ],
    });

const runtime = await createRuntime({
  // agentd.yaml in the working directory if there is one; the state goes to ./.agentd.
  config: loadConfig(),
  ...(model ? { model } : {}),
  tools,
  agents: [defineAgent({ id: 'counter', role: 'counts words' })],
});
runtime.bus.on('run:tool-finished', (event) => {
  console.log(`tool ${event.data.toolName}: ${event.data.result}`);
});
try {
  const reply = await runtime.sendMessage({ text: 'How many words are in "the quick brown fox"?' });
  console.log(`${reply.status}: ${reply.text}`);
} finally {
  await runtime.close();
}
