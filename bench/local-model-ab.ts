// Interleaved A/B of the offline local model between builds of agentd, in one process: the time of
// `completeModel(createLocalModel())` from each tree's dist/ over the same conversation, as a chat turn at a
// person's pace hands it over: the served agent's system prompt (its identity, from this tree's whole runtime)
// followed by a recalled block that changes every turn (8 of 60 recurring memory lines, in automatic recall's
// line format), a history that moves on by one exchange a turn (32 exchanges), and the newest question. Rounds
// of the conversation alternate between the trees, the order reversed every other round. Not a benchmark
// module (`npm run bench` does not run it); the trees need dist/ built (see bench/chat-turn-ab.ts for a
// worktree of an older revision):
//   npx tsx bench/local-model-ab.ts /tmp/before . [--rounds 10] [--turns 400]
import type { ModelMessage } from '../src/model/index.js';
import { takeFlag } from './args.js';
import { random, topics, word } from './recall-corpus.js';
import { assertRuntimeBuilt, serveRuntime } from './runtime-server.js';
import { importFromTrees, interleavedRounds, printTreeTable, treesFrom } from './tree-ab.js';

const args = process.argv.slice(2);
const rounds = Number(takeFlag(args, '--rounds') ?? 10);
const turnCount = Number(takeFlag(args, '--turns') ?? 400);
const trees = treesFrom(args, 'local-model-ab <tree> <tree> [...] [--rounds 10] [--turns 400]');

assertRuntimeBuilt();
const served = await serveRuntime({ token: 'bench-token' });
const identity = await served.runtime.identity.systemPrompt('main');
await served.stop();

const next = random(5);
const topic = () => topics[Math.floor(next() * topics.length)]!;
const memories = Array.from(
  { length: 60 },
  (_, index) =>
    `- [agent:main:s${index % 7}#${3 * index + 1}, 2026-12-0${1 + (index % 5)}, user] we settled the ${topic()} and the ${word(next)} ${word(next)} for ${index} ${word(next)}.`,
);
const exchanges: ModelMessage[][] = Array.from({ length: turnCount + 32 }, (_, index) => [
  { role: 'user', content: `what did we say about ${topic()} and ${word(next)} ${word(next)} ${index}?` },
  {
    role: 'assistant',
    content: `[local model] From this conversation and recalled memory: "the ${word(next)}".`,
  },
]);
const turns = Array.from({ length: turnCount }, (_, index) => {
  const recalled = Array.from({ length: 8 }, () => memories[Math.floor(next() * memories.length)]!);
  const block = `Relevant memories from earlier conversations (may be outdated):\n${recalled.join('\n')}`;
  return {
    messages: [
      { role: 'system', content: `${identity}\n\n${block}` },
      ...exchanges.slice(index, index + 32).flat(),
      exchanges[index + 32]![0]!,
    ] satisfies ModelMessage[],
  };
});

const modules = await importFromTrees<typeof import('../src/model/index.js')>(trees, 'model/index.js');
const contenders = modules.map((models) => ({
  model: models.createLocalModel(),
  complete: models.completeModel,
}));
const conversation = async ({ model, complete }: (typeof contenders)[number]) => {
  const startedAt = performance.now();
  for (const request of turns) await complete(model, request);
  return ((performance.now() - startedAt) * 1000) / turns.length;
};
// Warm-up: the JIT, and each model's memory of the texts it read (every round reads the same conversation).
for (const contender of contenders) for (let index = 0; index < 3; index++) await conversation(contender);
const figures = await interleavedRounds(contenders.length, rounds, (position) =>
  conversation(contenders[position]!),
);
console.log(
  `\n${rounds} rounds of ${turnCount} turns a tree, each turn with a new recalled block; µs a turn of the local model\n`,
);
printTreeTable(trees, figures, 'µs a turn', 1);
process.exit(0);
