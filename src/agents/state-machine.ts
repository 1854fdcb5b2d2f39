import type { AgentRuntimeState } from './events.js';

export const agentRuntimeStates: ReadonlyArray<AgentRuntimeState> = [
  'idle',
  'listening',
  'thinking',
  'speaking',
  'error',
];

/**
 * The transitions: idle → listening | thinking | idle, listening → thinking | idle,
 * thinking → speaking | idle, speaking → idle, error → idle, and any state → error.
 * speaking → thinking and idle → speaking are refused.
 */
const allowed: Readonly<Record<AgentRuntimeState, ReadonlyArray<AgentRuntimeState>>> = {
  idle: ['listening', 'thinking', 'idle', 'error'],
  listening: ['thinking', 'idle', 'error'],
  thinking: ['speaking', 'idle', 'error'],
  speaking: ['idle', 'error'],
  error: ['idle', 'error'],
};

export function canAgentTransition(from: AgentRuntimeState, to: AgentRuntimeState): boolean {
  return allowed[from].includes(to);
}
