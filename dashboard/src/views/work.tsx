import { useEffect, useState } from 'preact/hooks';
import { errorText, timeOf, useGateway, useGatewayEvents, usePolling } from '../context.js';

interface WorkItem {
  id: string;
  kind: string;
  title: string;
  description: string;
  state: string;
  priority: number;
  parentId: string | null;
  agentId: string | null;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  attempts: number;
  maxAttempts: number;
  stateReason: string | null;
  sessionKey: string | null;
  createdAt?: number;
  updatedAt?: number;
}

interface Plan {
  planId: string;
  goal: string;
  sessionKey: string;
  tasks: Array<{ workItemId: string; title: string; state: string }>;
  synthesis?: string;
}

const sessionKey = 'agent:main:main';

function ItemDetails(props: { id: string; onClose(): void }) {
  const gateway = useGateway();
  const [detail, setDetail] = useState<{ item: WorkItem; ledger: any[] } | undefined>();
  const [error, setError] = useState('');
  usePolling(
    () => {
      gateway.call('work.get', { id: props.id }).then(setDetail, (failure) => setError(errorText(failure)));
    },
    2_000,
    [props.id],
  );
  return (
    <section class="card details" aria-label="Work item">
      <div class="row between">
        <h3>{detail?.item.title ?? props.id}</h3>
        <button type="button" class="ghost" aria-label="Close details" onClick={props.onClose}>
          ×
        </button>
      </div>
      {error && <p class="error">{error}</p>}
      {detail && (
        <>
          <p class="muted small">
            {detail.item.id} · {detail.item.kind} · attempts {detail.item.attempts}/{detail.item.maxAttempts}
            {detail.item.stateReason ? ` · ${detail.item.stateReason}` : ''}
          </p>
          {detail.item.description && <p>{detail.item.description}</p>}
          <h4>Ledger</h4>
          <ol class="log" aria-label="Ledger">
            {detail.ledger.length === 0 && <li class="muted">No ledger entries.</li>}
            {detail.ledger.map((entry) => (
              <li key={entry.seq}>
                <span class="badge">{entry.entryType}</span>{' '}
                <span class="muted small">{timeOf(entry.createdAt)}</span>{' '}
                {entry.content.length > 400 ? `${entry.content.slice(0, 399)}…` : entry.content}
              </li>
            ))}
          </ol>
        </>
      )}
    </section>
  );
}

export function WorkView() {
  const gateway = useGateway();
  const [items, setItems] = useState<WorkItem[]>([]);
  const [plans, setPlans] = useState<Plan[]>([]);
  const [goal, setGoal] = useState('');
  const [selected, setSelected] = useState<string | undefined>();
  const [filter, setFilter] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  const load = () =>
    gateway.call('work.list', { limit: 200, ...(filter ? { state: filter } : {}) }).then(
      (result) => setItems(result.items),
      (failure) => setError(errorText(failure)),
    );
  usePolling(load, 2_000, [filter]);
  useEffect(() => {
    // Plan and task events are scoped to their session; reading its history subscribes this connection.
    gateway.call('chat.history', { sessionKey, limit: 1 }).catch(() => undefined);
  }, []);

  useGatewayEvents((event, payload) => {
    if (event === 'agent.plan') {
      setPlans((current) => [
        {
          planId: payload.planId,
          goal: payload.goal,
          sessionKey: payload.sessionKey,
          tasks: payload.tasks.map((task: any) => ({
            workItemId: task.workItemId,
            title: task.title,
            state: 'queued',
          })),
        },
        ...current.filter((plan) => plan.planId !== payload.planId),
      ]);
      load();
    } else if (event === 'agent.status') {
      setPlans((current) =>
        current.map((plan) =>
          plan.planId === payload.planId
            ? {
                ...plan,
                tasks: plan.tasks.map((task) =>
                  task.workItemId === payload.workItemId ? { ...task, state: payload.state } : task,
                ),
              }
            : plan,
        ),
      );
      load();
    } else if (event === 'agent.synthesis') {
      setPlans((current) =>
        current.map((plan) => (plan.planId === payload.planId ? { ...plan, synthesis: payload.text } : plan)),
      );
    }
  });

  const submitGoal = (event: Event) => {
    event.preventDefault();
    if (!goal.trim()) return;
    setBusy(true);
    gateway
      .call('agent.control', { action: 'goal', goal: goal.trim(), sessionKey, agentId: 'main' })
      .then(
        () => {
          setGoal('');
          setError('');
          load();
        },
        (failure) => setError(errorText(failure)),
      )
      .finally(() => setBusy(false));
  };
  const control = (action: 'pause' | 'resume' | 'cancel', item: WorkItem) => {
    const call =
      action === 'cancel' && !item.sessionKey
        ? gateway.call('work.cancel', { id: item.id })
        : gateway.call('agent.control', {
            action,
            sessionKey: item.sessionKey ?? sessionKey,
            ids: [item.id],
          });
    call.then(load, (failure) => setError(errorText(failure)));
  };

  const children = new Map<string, number>();
  for (const item of items)
    if (item.parentId) children.set(item.parentId, (children.get(item.parentId) ?? 0) + 1);
  const counts = new Map<string, number>();
  for (const item of items) counts.set(item.state, (counts.get(item.state) ?? 0) + 1);

  return (
    <div class="stack">
      <form class="card row" aria-label="New goal" onSubmit={submitGoal}>
        <input
          aria-label="Goal"
          placeholder="A goal for the planner, e.g. Collect the open questions. Then draft answers."
          value={goal}
          onInput={(event) => setGoal((event.target as HTMLInputElement).value)}
        />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Planning…' : 'Plan goal'}
        </button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {plans.length > 0 && (
        <section class="card" aria-label="Goals">
          <h2>Goals</h2>
          {plans.map((plan) => {
            const done = plan.tasks.filter((task) =>
              ['completed', 'failed', 'cancelled'].includes(task.state),
            ).length;
            return (
              <div key={plan.planId} class="plan">
                <div class="row between">
                  <b>{plan.goal}</b>
                  <span class="muted small">
                    {done}/{plan.tasks.length} done
                  </span>
                </div>
                <div
                  class="progress"
                  role="progressbar"
                  aria-valuenow={done}
                  aria-valuemax={plan.tasks.length}
                >
                  <span style={{ width: `${plan.tasks.length ? (done / plan.tasks.length) * 100 : 0}%` }} />
                </div>
                <ol class="plan-tasks">
                  {plan.tasks.map((task) => (
                    <li key={task.workItemId}>
                      <span class={`badge work-${task.state}`}>{task.state}</span> {task.title}
                    </li>
                  ))}
                </ol>
                {plan.synthesis && <p class="synthesis">{plan.synthesis}</p>}
              </div>
            );
          })}
        </section>
      )}
      <div class="split wide">
        <section class="card" aria-label="Work queue">
          <div class="row between">
            <h2>Queue</h2>
            <div class="row">
              <span class="muted small">
                {[...counts.entries()].map(([state, count]) => `${state} ${count}`).join(' · ')}
              </span>
              <select
                aria-label="Filter by state"
                value={filter}
                onChange={(event) => setFilter((event.target as HTMLSelectElement).value)}
              >
                <option value="">all states</option>
                {['queued', 'running', 'blocked', 'paused', 'completed', 'failed', 'cancelled'].map(
                  (state) => (
                    <option key={state} value={state}>
                      {state}
                    </option>
                  ),
                )}
              </select>
            </div>
          </div>
          <div class="table-wrap">
            <table class="work-table">
              <thead>
                <tr>
                  <th>Title</th>
                  <th>State</th>
                  <th>Priority</th>
                  <th>Lease</th>
                  <th>Parent / children</th>
                  <th>
                    <span class="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {items.length === 0 && (
                  <tr>
                    <td colSpan={6} class="muted">
                      The queue is empty.
                    </td>
                  </tr>
                )}
                {items.map((item) => (
                  <tr key={item.id} class={item.id === selected ? 'selected' : ''} data-work-id={item.id}>
                    <td>
                      <button type="button" class="link" onClick={() => setSelected(item.id)}>
                        {item.title}
                      </button>
                      <div class="muted small">
                        {item.kind}
                        {item.agentId ? ` · ${item.agentId}` : ''}
                      </div>
                    </td>
                    <td>
                      <span class={`badge work-${item.state}`}>{item.state}</span>
                    </td>
                    <td>{item.priority}</td>
                    <td class="small">
                      {item.leaseOwner ? `${item.leaseOwner} until ${timeOf(item.leaseExpiresAt)}` : '—'}
                    </td>
                    <td class="small">
                      {item.parentId ? (
                        <button type="button" class="link" onClick={() => setSelected(item.parentId!)}>
                          ↑ parent
                        </button>
                      ) : (
                        '—'
                      )}
                      {children.get(item.id) ? ` · ${children.get(item.id)} children` : ''}
                    </td>
                    <td class="actions">
                      {(item.state === 'queued' || item.state === 'blocked') && (
                        <button type="button" class="small" onClick={() => control('pause', item)}>
                          Pause
                        </button>
                      )}
                      {item.state === 'paused' && (
                        <button type="button" class="small" onClick={() => control('resume', item)}>
                          Resume
                        </button>
                      )}
                      {!['completed', 'failed', 'cancelled', 'merged'].includes(item.state) && (
                        <button type="button" class="small ghost" onClick={() => control('cancel', item)}>
                          Cancel
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
        {selected && <ItemDetails id={selected} onClose={() => setSelected(undefined)} />}
      </div>
    </div>
  );
}
