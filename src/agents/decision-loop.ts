import { z } from 'zod';

/** The world agents live in: positions are clamped to `0..width` × `0..height`. */
export const worldBounds = { width: 1000, height: 600 } as const;

export interface WorldPosition {
  x: number;
  y: number;
}

/**
 * An agent acting on its own (move, wait or speak): every `intervalMs`, while idle with an empty
 * mailbox, it moves, waits or speaks. Offline rules decide unless `useModel` is set; then each decision is
 * one model call, at most `maxModelCalls` of them (the budget), after which the rules take over again.
 */
export const decisionLoopConfigSchema = z.object({
  intervalMs: z.number().int().min(100).max(3_600_000).default(5_000),
  useModel: z.boolean().default(false),
  maxModelCalls: z.number().int().min(0).max(100_000).default(20),
  /** Longest single move, in world units. */
  maxStep: z.number().positive().max(1_000).default(60),
});

export type DecisionLoopConfig = z.output<typeof decisionLoopConfigSchema>;

export type Decision =
  | { action: 'move'; to: WorldPosition }
  | { action: 'wait' }
  | { action: 'speak'; content: string };

const clamp = (value: number, max: number) => Math.min(max, Math.max(0, Math.round(value)));

export function clampToWorld(position: WorldPosition): WorldPosition {
  return { x: clamp(position.x, worldBounds.width), y: clamp(position.y, worldBounds.height) };
}

/** A stable starting point for an agent spawned without a position, so the same id lands in the same place. */
export function defaultPosition(id: string): WorldPosition {
  let hash = 2166136261;
  for (const char of id) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  return {
    x: 100 + (hash % (worldBounds.width - 200)),
    y: 80 + ((hash >>> 10) % (worldBounds.height - 160)),
  };
}

const idleRemarks = [
  'Anything I can help with?',
  'Taking a look around.',
  'All quiet here.',
  'Ready when you are.',
  'Checking in.',
];

/** The token-free rules: mostly wander, sometimes pause, now and then say something short. */
export function decideOffline(input: {
  position: WorldPosition;
  maxStep: number;
  random: () => number;
}): Decision {
  const roll = input.random();
  if (roll < 0.6) {
    const angle = input.random() * Math.PI * 2;
    const distance = input.maxStep * (0.3 + 0.7 * input.random());
    return {
      action: 'move',
      to: clampToWorld({
        x: input.position.x + Math.cos(angle) * distance,
        y: input.position.y + Math.sin(angle) * distance,
      }),
    };
  }
  if (roll < 0.85) return { action: 'wait' };
  const remark = idleRemarks[Math.floor(input.random() * idleRemarks.length)] ?? idleRemarks[0]!;
  return { action: 'speak', content: remark };
}

const modelDecisionSchema = z.discriminatedUnion('action', [
  z.object({ action: z.literal('move'), x: z.number(), y: z.number() }),
  z.object({ action: z.literal('wait') }),
  z.object({ action: z.literal('speak'), content: z.string().min(1).max(2_000) }),
]);

/** The instruction a model gets for one decision; its reply is parsed by `parseModelDecision`. */
export function decisionPrompt(input: { name: string; role: string; position: WorldPosition }): string {
  return [
    `You are ${input.name}${input.role ? ` (${input.role})` : ''} in a shared ${worldBounds.width}×${worldBounds.height} world,`,
    `standing at x=${input.position.x}, y=${input.position.y}. Decide what to do next.`,
    'Answer with one JSON object only: {"action":"move","x":<number>,"y":<number>}, {"action":"wait"}',
    'or {"action":"speak","content":"<one short sentence>"}.',
  ].join(' ');
}

/** The first JSON object in a model reply as a decision; anything unusable means waiting. */
export function parseModelDecision(text: string, position: WorldPosition, maxStep: number): Decision {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end <= start) return { action: 'wait' };
  let raw: unknown;
  try {
    raw = JSON.parse(text.slice(start, end + 1));
  } catch {
    return { action: 'wait' };
  }
  const parsed = modelDecisionSchema.safeParse(raw);
  if (!parsed.success) return { action: 'wait' };
  const decision = parsed.data;
  if (decision.action === 'move') {
    // A model may ask for a jump across the map; it walks at most one step towards it per decision.
    const dx = decision.x - position.x;
    const dy = decision.y - position.y;
    const distance = Math.hypot(dx, dy);
    const scale = distance > maxStep ? maxStep / distance : 1;
    return {
      action: 'move',
      to: clampToWorld({ x: position.x + dx * scale, y: position.y + dy * scale }),
    };
  }
  return decision;
}
