import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, timeOf, useGateway, useGatewayEvents } from '../context.js';

interface ToolCall {
  toolCallId: string;
  name: string;
  phase: string;
  args?: unknown;
  isError?: boolean;
  durationMs?: number;
}

interface Message {
  role: string;
  text: string;
  memoryId?: string | number;
  runId?: string;
  timestamp?: number;
  streaming?: boolean;
  tools?: ToolCall[];
}

interface Session {
  key: string;
  label?: string;
  updatedAt?: number;
  derivedTitle?: string;
  lastMessagePreview?: string;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
  return '';
}

const defaultSession = 'agent:main:main';

export function ChatView() {
  const gateway = useGateway();
  const [sessions, setSessions] = useState<Session[]>([]);
  const [sessionKey, setSessionKey] = useState(defaultSession);
  const [messages, setMessages] = useState<Message[]>([]);
  const [running, setRunning] = useState<string | undefined>();
  const [draft, setDraft] = useState('');
  const [error, setError] = useState('');
  const bottom = useRef<HTMLDivElement>(null);

  const loadSessions = () =>
    gateway.call('sessions.list', { limit: 100 }).then((result) => setSessions(result.sessions ?? []));
  const loadHistory = (key: string) =>
    gateway.call('chat.history', { sessionKey: key, limit: 200 }).then(
      (result) =>
        setMessages(
          result.messages.map((message: any) => ({
            role: message.role,
            text: textOf(message.content),
            memoryId: message.memoryId,
            runId: message.runId,
            timestamp: message.timestamp,
          })),
        ),
      (failure) => setError(errorText(failure)),
    );

  useEffect(() => {
    loadSessions();
  }, []);
  useEffect(() => {
    setRunning(undefined);
    loadHistory(sessionKey);
  }, [sessionKey]);
  useEffect(() => bottom.current?.scrollIntoView({ block: 'end' }), [messages]);

  const updateRun = (runId: string, update: (message: Message) => Message) =>
    setMessages((current) => {
      const index = current.findIndex((message) => message.runId === runId && message.role === 'assistant');
      if (index < 0)
        return [...current, update({ role: 'assistant', text: '', runId, streaming: true, tools: [] })];
      const next = current.slice();
      next[index] = update(current[index]!);
      return next;
    });

  useGatewayEvents((event, payload) => {
    if (payload?.sessionKey !== sessionKey) return;
    if (event === 'chat') {
      if (payload.state === 'delta') {
        setRunning(payload.runId);
        updateRun(payload.runId, (message) => ({
          ...message,
          text:
            payload.replace || payload.deltaText === undefined
              ? textOf(payload.message?.content)
              : message.text + payload.deltaText,
          streaming: true,
        }));
      } else {
        setRunning((current) => (current === payload.runId ? undefined : current));
        updateRun(payload.runId, (message) => ({
          ...message,
          text: payload.message ? textOf(payload.message.content) : message.text,
          streaming: false,
        }));
        if (payload.state === 'error') setError(payload.errorMessage ?? 'the run failed');
        // The final history carries the MemoryIDs the store gave both messages.
        loadHistory(sessionKey);
        loadSessions();
      }
    } else if (event === 'agent' && payload.stream === 'tool') {
      setRunning(payload.runId);
      const data = payload.data;
      updateRun(payload.runId, (message) => {
        const tools = [...(message.tools ?? [])];
        const index = tools.findIndex((tool) => tool.toolCallId === data.toolCallId);
        const entry: ToolCall = {
          ...(index >= 0 ? tools[index] : {}),
          toolCallId: data.toolCallId,
          name: data.name,
          phase: data.phase,
          ...(data.args !== undefined ? { args: data.args } : {}),
          ...(data.isError !== undefined ? { isError: data.isError } : {}),
          ...(data.durationMs !== undefined ? { durationMs: data.durationMs } : {}),
        };
        if (index >= 0) tools[index] = entry;
        else tools.push(entry);
        return { ...message, tools };
      });
    }
  });

  const send = (event: Event) => {
    event.preventDefault();
    const text = draft.trim();
    if (!text) return;
    setDraft('');
    setError('');
    if (text !== '/new' && text !== '/reset' && text !== '/stop')
      setMessages((current) => [...current, { role: 'user', text, timestamp: Date.now() }]);
    gateway.call('chat.send', { sessionKey, message: text, idempotencyKey: crypto.randomUUID() }).then(
      (result) => {
        if (result.runId && result.status === 'started') setRunning(result.runId);
        if (result.reset) {
          loadHistory(sessionKey);
          loadSessions();
        }
      },
      (failure) => setError(errorText(failure)),
    );
  };
  const stop = () => {
    gateway.call('chat.abort', { sessionKey }).catch((failure) => setError(errorText(failure)));
  };
  const newSession = () => {
    const key = `agent:main:web-${Date.now().toString(36)}`;
    setSessionKey(key);
    setSessions((current) => [{ key, label: 'new session' }, ...current]);
  };

  return (
    <div class="split">
      <aside class="card sessions" aria-label="Sessions">
        <div class="row between">
          <h2>Sessions</h2>
          <button type="button" class="small" onClick={newSession}>
            New
          </button>
        </div>
        <ul class="session-list">
          {[
            { key: defaultSession } as Session,
            ...sessions.filter((session) => session.key !== defaultSession),
          ].map((session) => (
            <li key={session.key}>
              <button
                type="button"
                class={session.key === sessionKey ? 'session active' : 'session'}
                onClick={() => setSessionKey(session.key)}
              >
                <span>{session.label ?? session.derivedTitle ?? session.key}</span>
                <span class="muted small">{session.key}</span>
              </button>
            </li>
          ))}
        </ul>
      </aside>
      <section class="card chat" aria-label="Chat">
        <div class="row between">
          <h2>{sessionKey}</h2>
          <span class="muted small">/new starts a fresh session · /goal plans work</span>
        </div>
        <div class="messages" aria-live="polite">
          {messages.length === 0 && <p class="muted">No messages yet. Say hello.</p>}
          {messages.map((message, index) => (
            <article
              key={`${message.runId ?? ''}-${index}`}
              class={`message ${message.role}`}
              data-role={message.role}
            >
              <header class="muted small">
                {message.role}
                {message.memoryId !== undefined && (
                  <span class="memory-id"> · MemoryID {String(message.memoryId)}</span>
                )}
                {message.timestamp ? ` · ${timeOf(message.timestamp)}` : ''}
                {message.streaming && <span class="streaming"> · streaming…</span>}
              </header>
              {message.tools && message.tools.length > 0 && (
                <ul class="tools" aria-label="Tool calls">
                  {message.tools.map((tool) => (
                    <li key={tool.toolCallId} class={`tool ${tool.isError ? 'failed' : tool.phase}`}>
                      <code>{tool.name}</code>{' '}
                      <span class="badge">{tool.isError ? 'error' : tool.phase}</span>
                      {tool.durationMs !== undefined && (
                        <span class="muted small"> {tool.durationMs} ms</span>
                      )}
                      {tool.args !== undefined && (
                        <details>
                          <summary class="small">arguments</summary>
                          <pre>{JSON.stringify(tool.args, null, 2)}</pre>
                        </details>
                      )}
                    </li>
                  ))}
                </ul>
              )}
              <div class="text">{message.text}</div>
            </article>
          ))}
          <div ref={bottom} />
        </div>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <form class="row composer" onSubmit={send}>
          <input
            aria-label="Message"
            placeholder="Message the agent (/new, /goal …)"
            value={draft}
            onInput={(event) => setDraft((event.target as HTMLInputElement).value)}
          />
          <button type="submit" class="primary">
            Send
          </button>
          <button type="button" onClick={stop} disabled={!running}>
            Stop
          </button>
        </form>
      </section>
    </div>
  );
}
