// Parallel tool execution: one model turn requests 5 tool calls that each take 100 ms. A loop that runs the
// calls of a turn in parallel finishes the run in ~100 ms; a sequential one needs ~500 ms. Compared with
// agentd forced to sequential (maxParallelTools: 1) and with the three peers' default behaviour.
import {
  agentdContender,
  type Contender,
  langGraphContender,
  mastraContender,
  openAiAgentsContender,
  type Scenario,
} from './engage-loop.bench.js';
import { percentile } from './stats.js';

const toolMs = 100;
const calls = 5;
const repetitions = 5;

export default {
  name: 'parallel-tools',
  description: `one turn with ${calls} tool calls of ${toolMs} ms each: total run time, agentd parallel vs sequential vs peers`,
  async run() {
    const scenario: Scenario = {
      toolTurns: 1,
      callsPerTurn: calls,
      work: () => new Promise((resolve) => setTimeout(resolve, toolMs)),
    };
    const notes: string[] = [];
    const candidates: Array<[string, () => Contender]> = [
      ['agentd', () => agentdContender(scenario)],
      [
        'agentd sequential',
        () => agentdContender(scenario, { maxParallelTools: 1, name: 'agentd (maxParallelTools: 1)' }),
      ],
      ['LangGraph.js', () => langGraphContender(scenario)],
      ['OpenAI Agents SDK', () => openAiAgentsContender(scenario)],
      ['Mastra', () => mastraContender(scenario)],
    ];
    const contenders: Contender[] = [];
    for (const [label, make] of candidates) {
      try {
        const contender = make();
        const executed = await contender.run();
        if (executed !== calls) throw new Error(`executed ${executed} tool calls, expected ${calls}`);
        contenders.push(contender);
      } catch (error) {
        notes.push(`${label} could not run the scenario and is left out: ${(error as Error).message}`);
      }
    }
    const samples = new Map<Contender, number[]>(contenders.map((contender) => [contender, []]));
    for (let round = 0; round < repetitions; round++) {
      for (const contender of round % 2 === 0 ? contenders : [...contenders].reverse()) {
        const started = performance.now();
        await contender.run();
        samples.get(contender)!.push(performance.now() - started);
      }
    }
    const rows = contenders.map((contender) => {
      const sorted = [...samples.get(contender)!].sort((left, right) => left - right);
      const median = percentile(sorted, 50);
      return {
        contender: contender.name,
        version: contender.version,
        'median ms / run': Number(median.toFixed(1)),
        'max ms / run': Number(sorted.at(-1)!.toFixed(1)),
        'vs one tool call': `${(median / toolMs).toFixed(2)}×`,
      };
    });
    notes.push(
      `Each run: the model asks for ${calls} tool calls in one turn, each tool waits ${toolMs} ms (setTimeout), then the model answers. ${repetitions} runs per contender, interleaved, after one warm-up run.`,
      `Ideal parallel time is ${toolMs} ms plus loop overhead; sequential is ${calls * toolMs} ms.`,
      'The models are the instant fakes of engage-loop.bench.ts.',
    );
    return { rows, notes };
  },
};
