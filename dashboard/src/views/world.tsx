import { useEffect, useState } from 'preact/hooks';
import { errorText, timeOf, useGateway, useGatewayEvents } from '../context.js';

interface Agent {
  id: string;
  name: string;
  role: string;
  state: 'idle' | 'listening' | 'thinking' | 'speaking' | 'error';
  position: { x: number; y: number };
  model: string;
  cliBackend: string | null;
  currentTask: string | null;
  autonomy: { intervalMs: number; useModel: boolean; modelCallsLeft: number } | null;
}

interface Bubble {
  text: string;
  until: number;
}

const worldWidth = 1000;
const worldHeight = 600;
const bubbleMs = 6_000;

const stateColors: Record<Agent['state'], string> = {
  idle: '#64748b',
  listening: '#0ea5e9',
  thinking: '#a855f7',
  speaking: '#22c55e',
  error: '#ef4444',
};

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function AgentDetails(props: { agent: Agent; onClose(): void }) {
  const gateway = useGateway();
  const [conversation, setConversation] = useState<any[]>([]);
  const [states, setStates] = useState<any[]>([]);
  const [tasks, setTasks] = useState<any[]>([]);
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const load = () => {
    gateway.call('agents.conversation', { agentId: props.agent.id, limit: 50 }).then(
      (result) => setConversation(result.messages),
      (failure) => setError(errorText(failure)),
    );
    gateway.call('agents.history', { agentId: props.agent.id, limit: 30 }).then((result) => {
      setStates(result.states);
      setTasks(result.tasks);
    });
  };
  useEffect(load, [props.agent.id]);
  useGatewayEvents((event, payload) => {
    if ((event === 'agent.speech' || event === 'agent.state_update') && payload.agent_id === props.agent.id)
      load();
  });
  const act = (method: 'agents.message' | 'agents.assign') => {
    if (!text.trim()) return;
    const params =
      method === 'agents.message'
        ? { agentId: props.agent.id, content: text.trim() }
        : { agentId: props.agent.id, task: text.trim() };
    gateway.call(method, params).then(
      () => {
        setText('');
        setError('');
      },
      (failure) => setError(errorText(failure)),
    );
  };
  return (
    <section class="card details" aria-label={`Agent ${props.agent.name}`}>
      <div class="row between">
        <h3>
          {props.agent.name} <span class={`badge state-${props.agent.state}`}>{props.agent.state}</span>
        </h3>
        <button type="button" class="ghost" onClick={props.onClose} aria-label="Close details">
          ×
        </button>
      </div>
      <p class="muted small">
        {props.agent.id} · {props.agent.cliBackend ? `CLI ${props.agent.cliBackend}` : props.agent.model}
        {props.agent.role ? ` · ${props.agent.role}` : ''}
      </p>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          act('agents.message');
        }}
      >
        <input
          aria-label={`Message to ${props.agent.name}`}
          placeholder="Say something or describe a task"
          value={text}
          onInput={(event) => setText((event.target as HTMLInputElement).value)}
        />
        <button type="submit" class="primary">
          Message
        </button>
        <button type="button" onClick={() => act('agents.assign')}>
          Assign task
        </button>
      </form>
      {error && <p class="error">{error}</p>}
      <h4>Conversation</h4>
      <ol class="log" aria-label="Conversation">
        {conversation.length === 0 && <li class="muted">Nothing said yet.</li>}
        {conversation.map((entry, index) => (
          <li key={index}>
            <span class="muted small">{timeOf(entry.timestamp)}</span> <b>{entry.sender}</b>
            {entry.recipient ? ` → ${entry.recipient}` : ''}: {entry.content}
          </li>
        ))}
      </ol>
      {tasks.length > 0 && (
        <>
          <h4>Tasks</h4>
          <ul class="log">
            {tasks.map((task) => (
              <li key={task.id}>
                <span class={`badge task-${task.status}`}>{task.status}</span> {task.taskName}
                {task.result ? <span class="muted"> — {clip(task.result, 120)}</span> : null}
              </li>
            ))}
          </ul>
        </>
      )}
      <h4>State history</h4>
      <ol class="log compact">
        {states
          .slice(-12)
          .reverse()
          .map((entry, index) => (
            <li key={index}>
              <span class="muted small">{timeOf(entry.timestamp)}</span> {entry.oldState} → {entry.newState}
              {entry.reason ? <span class="muted"> ({entry.reason})</span> : null}
            </li>
          ))}
      </ol>
    </section>
  );
}

export function WorldView() {
  const gateway = useGateway();
  const [agents, setAgents] = useState<Map<string, Agent>>(new Map());
  const [bubbles, setBubbles] = useState<Map<string, Bubble>>(new Map());
  const [selected, setSelected] = useState<string | undefined>();
  const [error, setError] = useState('');
  const [spawnName, setSpawnName] = useState('');
  const [spawnRole, setSpawnRole] = useState('');
  const [spawnBackend, setSpawnBackend] = useState('');
  const [wander, setWander] = useState(true);
  const [broadcast, setBroadcast] = useState('');
  const [, setTick] = useState(0);

  const refresh = () =>
    gateway.call<{ agents: Agent[] }>('agents.list').then(
      (result) => setAgents(new Map(result.agents.map((agent) => [agent.id, agent]))),
      (failure) => setError(errorText(failure)),
    );
  useEffect(() => {
    refresh();
    // Speech bubbles fade on their own.
    const timer = setInterval(() => setTick((value) => value + 1), 1_000);
    return () => clearInterval(timer);
  }, []);

  useGatewayEvents((event, payload) => {
    if (event === 'agent.spawned' || event === 'agent.terminated') {
      refresh();
      return;
    }
    if (event === 'agent.state_update' || event === 'agent.moved') {
      setAgents((current) => {
        const agent = current.get(payload.agent_id);
        if (!agent) {
          refresh();
          return current;
        }
        const next = new Map(current);
        next.set(agent.id, {
          ...agent,
          ...(payload.state ? { state: payload.state } : {}),
          ...(payload.position ? { position: payload.position } : {}),
          ...(payload.current_task !== undefined ? { currentTask: payload.current_task } : {}),
        });
        return next;
      });
      return;
    }
    if (event === 'agent.speech') {
      setBubbles((current) =>
        new Map(current).set(payload.agent_id, { text: payload.content, until: Date.now() + bubbleMs }),
      );
    }
  });

  const spawn = (event: Event) => {
    event.preventDefault();
    if (!spawnName.trim()) return;
    gateway
      .call('agents.spawn', {
        name: spawnName.trim(),
        role: spawnRole.trim(),
        ...(spawnBackend ? { cliBackend: spawnBackend } : {}),
        ...(wander ? { decisionLoop: { intervalMs: 4_000 } } : {}),
      })
      .then(
        () => {
          setSpawnName('');
          setSpawnRole('');
          setError('');
        },
        (failure) => setError(errorText(failure)),
      );
  };
  const sendBroadcast = (event: Event) => {
    event.preventDefault();
    if (!broadcast.trim()) return;
    gateway.call('agent.broadcast', { content: broadcast.trim(), from: 'user' }).then(
      () => setBroadcast(''),
      (failure) => setError(errorText(failure)),
    );
  };
  const terminate = (agent: Agent) => {
    if (!window.confirm(`Terminate ${agent.name}?`)) return;
    gateway.call('agents.terminate', { agentId: agent.id }).catch((failure) => setError(errorText(failure)));
  };

  const list = [...agents.values()].sort((left, right) => left.name.localeCompare(right.name));
  const now = Date.now();
  const selectedAgent = selected ? agents.get(selected) : undefined;

  return (
    <div class="world-layout">
      <section class="card map-card" aria-label="World map">
        <div class="row between">
          <h2>World</h2>
          <div class="legend" aria-hidden="true">
            {Object.entries(stateColors).map(([state, color]) => (
              <span key={state}>
                <i style={{ background: color }} />
                {state}
              </span>
            ))}
          </div>
        </div>
        <svg
          class="map"
          viewBox={`0 0 ${worldWidth} ${worldHeight}`}
          role="img"
          aria-label={`Map of ${list.length} agents`}
        >
          <defs>
            <pattern id="grid" width="50" height="50" patternUnits="userSpaceOnUse">
              <path d="M 50 0 L 0 0 0 50" fill="none" stroke="var(--grid)" stroke-width="1" />
            </pattern>
          </defs>
          <rect width={worldWidth} height={worldHeight} fill="url(#grid)" />
          {list.map((agent) => {
            const bubble = bubbles.get(agent.id);
            const color = stateColors[agent.state];
            const bubbleText = bubble && bubble.until > now ? clip(bubble.text, 42) : undefined;
            const bubbleWidth = bubbleText ? Math.max(60, bubbleText.length * 8.2 + 20) : 0;
            return (
              // biome-ignore lint/a11y/useSemanticElements: an SVG group cannot be a <button>; it behaves as one
              <g
                key={agent.id}
                class={`agent agent-${agent.state}${agent.id === selected ? ' selected' : ''}`}
                style={{ transform: `translate(${agent.position.x}px, ${agent.position.y}px)` }}
                onClick={() => setSelected(agent.id)}
                onKeyDown={(event) => {
                  if (event.key === 'Enter' || event.key === ' ') setSelected(agent.id);
                }}
                role="button"
                tabIndex={0}
                aria-label={`${agent.name}, ${agent.state}, at ${agent.position.x}, ${agent.position.y}`}
                data-agent-id={agent.id}
              >
                {(agent.state === 'thinking' || agent.state === 'listening') && (
                  <circle class="pulse" r="26" fill="none" stroke={color} stroke-width="3" />
                )}
                <circle r="18" fill={color} stroke="#fff" stroke-width="3" />
                <text class="initial" y="6" text-anchor="middle">
                  {agent.name.slice(0, 1).toUpperCase()}
                </text>
                <text class="label" y="38" text-anchor="middle">
                  {agent.name}
                </text>
                {bubbleText && (
                  <g class="bubble" transform={`translate(${-bubbleWidth / 2}, -66)`}>
                    <rect width={bubbleWidth} height="32" rx="10" />
                    <path
                      d={`M ${bubbleWidth / 2 - 7} 32 L ${bubbleWidth / 2} 42 L ${bubbleWidth / 2 + 7} 32 Z`}
                    />
                    <text x={bubbleWidth / 2} y="21" text-anchor="middle">
                      {bubbleText}
                    </text>
                  </g>
                )}
              </g>
            );
          })}
        </svg>
        <form class="row" onSubmit={sendBroadcast}>
          <input
            aria-label="Broadcast message"
            placeholder="Broadcast to every agent"
            value={broadcast}
            onInput={(event) => setBroadcast((event.target as HTMLInputElement).value)}
          />
          <button type="submit">Broadcast</button>
        </form>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </section>
      <aside class="side">
        <section class="card" aria-label="Agents">
          <h2>Agents ({list.length})</h2>
          <ul class="agent-list" id="agent-list">
            {list.map((agent) => (
              <li key={agent.id} data-agent-id={agent.id} class={agent.id === selected ? 'selected' : ''}>
                <button type="button" class="link" onClick={() => setSelected(agent.id)}>
                  <span class="dot" style={{ background: stateColors[agent.state] }} aria-hidden="true" />
                  <span class="agent-name">{agent.name}</span>
                </button>
                <span class={`badge state-${agent.state} agent-state`}>{agent.state}</span>
                <span class="muted small agent-position">
                  ({agent.position.x}, {agent.position.y})
                </span>
                <span class="muted small agent-model">
                  {agent.cliBackend ? `CLI ${agent.cliBackend}` : agent.model}
                </span>
                <button
                  type="button"
                  class="ghost small"
                  onClick={() => terminate(agent)}
                  aria-label={`Terminate ${agent.name}`}
                >
                  Terminate
                </button>
              </li>
            ))}
            {list.length === 0 && <li class="muted">No agents. Spawn one below.</li>}
          </ul>
        </section>
        <form class="card" aria-label="Spawn an agent" onSubmit={spawn}>
          <h2>Spawn</h2>
          <label for="spawn-name">Name</label>
          <input
            id="spawn-name"
            value={spawnName}
            onInput={(event) => setSpawnName((event.target as HTMLInputElement).value)}
          />
          <label for="spawn-role">Role</label>
          <input
            id="spawn-role"
            value={spawnRole}
            onInput={(event) => setSpawnRole((event.target as HTMLInputElement).value)}
          />
          <label for="spawn-backend">Runs on</label>
          <select
            id="spawn-backend"
            value={spawnBackend}
            onChange={(event) => setSpawnBackend((event.target as HTMLSelectElement).value)}
          >
            <option value="">the server's model</option>
            <option value="claude">CLI: claude</option>
            <option value="gemini">CLI: gemini</option>
          </select>
          <label class="check">
            <input
              type="checkbox"
              checked={wander}
              onChange={(event) => setWander((event.target as HTMLInputElement).checked)}
            />
            Acts on its own (moves, speaks; no model tokens)
          </label>
          <button type="submit" class="primary">
            Spawn agent
          </button>
        </form>
        {selectedAgent && <AgentDetails agent={selectedAgent} onClose={() => setSelected(undefined)} />}
      </aside>
    </div>
  );
}
