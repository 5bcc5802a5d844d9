// BullMQ (Node) on one of the peer bench's workloads, against the redis-server the bench
// started; prints one JSON line of metrics, as the Rust side computes them (src/main.rs).
//
//     node bench.mjs <drain50 | drain200 | keep_up> <port>
//
// The same 92-byte payload; jobs removed on completion, as delayq deletes an acked message;
// a job's due time is its timestamp plus its delay.
import { Queue, Worker } from 'bullmq';

const [workload, port] = process.argv.slice(2);
const connection = { host: '127.0.0.1', port: Number(port) };
const N = 50_000;

const payload = (i) => ({
  order_id: i,
  customer: `customer-${String(i % 100_000).padStart(8, '0')}`,
  note: 'close the order if it is still unpaid',
});

// Handler starts: [lateness µs, when (ms, monotonic)].
const starts = [];
const nowMs = () => performance.timeOrigin + performance.now();

function summarize() {
  if (starts.length !== N) throw new Error(`${starts.length} of ${N} handled`);
  const when = starts.map((s) => s[1]);
  const late = starts.map((s) => s[0]).sort((a, b) => a - b);
  const first = Math.min(...when);
  const last = Math.max(...when);
  const pct = (p) => late[Math.round((late.length - 1) * p)] / 1000;
  return {
    msgs_per_s: N / ((last - first) / 1000),
    lateness_p50_ms: pct(0.5),
    lateness_p99_ms: pct(0.99),
    lateness_max_ms: late[late.length - 1] / 1000,
  };
}

function worker(name, concurrency) {
  return new Worker(
    name,
    async (job) => {
      starts.push([(nowMs() - (job.timestamp + (job.opts.delay || 0))) * 1000, performance.now()]);
    },
    { connection, concurrency, removeOnComplete: { count: 0 } },
  );
}

async function send(queue, items) {
  for (let i = 0; i < items.length; i += 5_000) {
    await queue.addBulk(
      items.slice(i, i + 5_000).map(([n, delay]) => ({
        name: 'j',
        data: payload(n),
        // A job due now goes to BullMQ's wait list, not its delayed set.
        opts: delay > 0 ? { delay } : {},
      })),
    );
  }
}

async function handled() {
  const deadline = performance.now() + 600_000;
  while (starts.length < N) {
    if (performance.now() > deadline) throw new Error(`only ${starts.length} handled`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

const name = workload === 'keep_up' ? 'node.keep_up' : `node.${workload}`;
const queue = new Queue(name, { connection });
await (await queue.client).flushall();
let w;
if (workload === 'keep_up') {
  w = worker(name, 50);
  await w.waitUntilReady();
  for (let i = 0; i < N; i += 1_000) {
    const chunk = [];
    for (let n = i; n < i + 1_000; n++) chunk.push([n, Math.floor(Math.random() * 5_001)]);
    await send(queue, chunk);
  }
} else {
  const concurrency = { drain50: 50, drain200: 200 }[workload];
  if (!concurrency) throw new Error(`unknown workload ${workload}`);
  const items = [];
  for (let n = 0; n < N; n++) items.push([n, 0]);
  await send(queue, items);
  w = worker(name, concurrency);
}
await handled();
await w.close();
await queue.close();
console.log(JSON.stringify(summarize()));
