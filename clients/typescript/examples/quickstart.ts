// A sandbox for one task: create it, run commands, move a file in and out, destroy it when
// the block ends. Run with SANDBOXD_SOCKET set (or the daemon on /run/sandboxd.sock):
//   npm run build && npm run build:test && node dist-test/examples/quickstart.js

import { Client, NoSuchSandbox } from "sandboxd";

await using client = new Client();
let id = "";
{
  await using sb = await client.create({ ttlS: 600, labels: { example: "quickstart" } });
  id = sb.id;
  console.log(`sandbox ${sb.id} on ${sb.info.node} at ${sb.ip}`);

  const r = await sb.exec("uname -sr; echo oops >&2; exit 3");
  console.log(`exit ${r.exitCode}: ${r.stdout.trim()} / ${r.stderr.trim()}`);

  process.stdout.write("counting:");
  await sb.exec("for i in 1 2 3; do echo $i; sleep 0.2; done", {
    onOutput: (chunk) => process.stdout.write(` ${chunk.text.trim().split("\n").join(" ")}`),
  });
  process.stdout.write("\n");

  await sb.writeFile("/root/www/index.html", "<h1>Hello</h1>");
  const page = await sb.readText("/root/www/index.html");
  console.log(`read ${page.length} bytes: ${page}`);
}
try {
  await client.get(id);
  console.log("destroying");
} catch (err) {
  if (!(err instanceof NoSuchSandbox)) throw err;
  console.log("destroyed");
}
