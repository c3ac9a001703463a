// labels.test.mjs: the parameter panel's labels (web-client/src/core/panel.mjs, paramLabels).
// A group's rows are labelled by what differs between their names; an array's elements
// differ by their index alone, and a row labelled "0 (HU)" said nothing (a trial user's
// report): they keep their array's name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { paramLabels } from '../../web-client/src/core/panel.mjs';

test('the panel labels rows by what differs, an array\'s elements with its name', () => {
  assert.deepEqual(paramLabels(['a_b.c', 'a_b.d_e']), ['c', 'd e']);
  assert.deepEqual(paramLabels(['x_y.0', 'x_y.1', 'x_y.2']), ['x y 0', 'x y 1', 'x y 2']);
  assert.deepEqual(paramLabels(['g.x_y.0', 'g.x_y.1']), ['x y 0', 'x y 1']);
  assert.deepEqual(paramLabels(['only_one']), ['only one']);
  assert.deepEqual(paramLabels(['p', 'q']), ['p', 'q']);
});
