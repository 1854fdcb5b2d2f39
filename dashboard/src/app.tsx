import { useEffect, useState } from 'preact/hooks';
import { forgetToken, storedToken, storeToken, takeTokenFromLocation } from './auth.js';
import { errorText, GatewayContext } from './context.js';
import { connectGateway, type Gateway, gatewayUrl } from './gateway.js';
import { ChatView } from './views/chat.js';
import { HealthView } from './views/health.js';
import { MemoryView } from './views/memory.js';
import { WorkView } from './views/work.js';
import { WorkflowsView } from './views/workflows.js';
import { WorldView } from './views/world.js';

const views = [
  { id: 'world', label: 'World', component: WorldView },
  { id: 'chat', label: 'Chat', component: ChatView },
  { id: 'work', label: 'Work', component: WorkView },
  { id: 'workflows', label: 'Workflows', component: WorkflowsView },
  { id: 'memory', label: 'Memory', component: MemoryView },
  { id: 'health', label: 'Health', component: HealthView },
] as const;

type ViewId = (typeof views)[number]['id'];

function viewFromHash(): ViewId {
  const id = window.location.hash.replace(/^#/, '');
  return (views.find((view) => view.id === id)?.id ?? 'world') as ViewId;
}

type Connection =
  | { phase: 'signed-out'; error?: string }
  | { phase: 'connecting'; token: string }
  | { phase: 'connected'; token: string; gateway: Gateway }
  | { phase: 'reconnecting'; token: string; reason: string };

function SignIn(props: { error?: string | undefined; onToken(token: string): void }) {
  const [value, setValue] = useState('');
  return (
    <main class="signin">
      <form
        class="card signin-card"
        aria-label="Sign in"
        onSubmit={(event) => {
          event.preventDefault();
          if (value.trim()) props.onToken(value.trim());
        }}
      >
        <h1>
          <span class="logo" aria-hidden="true" />
          agentd
        </h1>
        <p class="muted">
          Enter the gateway token printed by <code>agentd serve</code>.
        </p>
        <label for="token">Access token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="current-password"
          value={value}
          onInput={(event) => setValue((event.target as HTMLInputElement).value)}
        />
        {props.error && (
          <p class="error" role="alert">
            {props.error}
          </p>
        )}
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
    </main>
  );
}

export function App() {
  const [connection, setConnection] = useState<Connection>(() => {
    const token = takeTokenFromLocation() ?? storedToken();
    return token ? { phase: 'connecting', token } : { phase: 'signed-out' };
  });
  const [view, setView] = useState<ViewId>(viewFromHash);

  useEffect(() => {
    const onHash = () => setView(viewFromHash());
    window.addEventListener('hashchange', onHash);
    // The first render read the hash, but effects run later: a hash set in between fired no listener.
    onHash();
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  useEffect(() => {
    if (connection.phase !== 'connecting' && connection.phase !== 'reconnecting') return;
    let cancelled = false;
    const { token } = connection;
    const attempt = () =>
      connectGateway(gatewayUrl(window.location), token).then(
        (gateway) => {
          if (cancelled) return gateway.close();
          storeToken(token);
          setConnection({ phase: 'connected', token, gateway });
          gateway.closed.then((reason) => {
            if (!cancelled) setConnection({ phase: 'reconnecting', token, reason });
          });
        },
        (error) => {
          if (cancelled) return;
          if (connection.phase === 'reconnecting' && error.code === 'GATEWAY_CLOSED') {
            timer = setTimeout(attempt, 2_000);
            return;
          }
          forgetToken();
          setConnection({ phase: 'signed-out', error: `Sign-in failed: ${errorText(error)}` });
        },
      );
    let timer: ReturnType<typeof setTimeout> | undefined =
      connection.phase === 'reconnecting' ? setTimeout(attempt, 1_000) : undefined;
    if (connection.phase === 'connecting') attempt();
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [connection]);

  if (connection.phase === 'signed-out')
    return (
      <SignIn error={connection.error} onToken={(token) => setConnection({ phase: 'connecting', token })} />
    );
  if (connection.phase !== 'connected')
    return (
      <main class="signin">
        <p class="card" role="status">
          {connection.phase === 'connecting'
            ? 'Connecting…'
            : `Disconnected (${connection.reason}); reconnecting…`}
        </p>
      </main>
    );

  const Current = views.find((entry) => entry.id === view)!.component;
  return (
    <GatewayContext.Provider value={connection.gateway}>
      <header class="topbar">
        <div class="brand">
          <span class="logo" aria-hidden="true" />
          agentd
        </div>
        <nav aria-label="Views">
          {views.map((entry) => (
            <a
              key={entry.id}
              href={`#${entry.id}`}
              class={entry.id === view ? 'tab active' : 'tab'}
              aria-current={entry.id === view ? 'page' : undefined}
            >
              {entry.label}
            </a>
          ))}
        </nav>
        <button
          type="button"
          class="ghost signout"
          onClick={() => {
            forgetToken();
            connection.gateway.close();
            setConnection({ phase: 'signed-out' });
          }}
        >
          Sign out
        </button>
      </header>
      <main class="content" id={`view-${view}`}>
        <Current />
      </main>
    </GatewayContext.Provider>
  );
}
