// What every emitter here ends with: the JSON description on stdout (BigInts,
// nanosecond times, written as exact numbers) and an exit code: 0, 1 if an
// export failed (listed in `out.failures`), 2 if the emitter threw.
'use strict';

function toJson(value) {
  return JSON.stringify(value, (k, v) => (typeof v === 'bigint' ? `#big#${v}` : v), 1)
    .replace(/"#big#(-?\d+)"/g, '$1');
}

function report(out) {
  process.stdout.write(`${toJson(out)}\n`);
  if (out.failures.length) {
    process.stderr.write(`export failures: ${out.failures.join('; ')}\n`);
    return 1;
  }
  return 0;
}

// Runs async `main` (which returns report(...)) and sets the exit code.
function run(main) {
  main().then((code) => { process.exitCode = code; }, (err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exitCode = 2;
  });
}

module.exports = { report, run };
