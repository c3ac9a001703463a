// controlopen.test.mjs: the driver's "viewers may take control when nobody drives" checkbox
// (#control-open in #control-open-row, web-client/src/core/classroom.mjs) in the browser,
// against the real server (tests/server/classroom.test.mjs holds the protocol: set_control
// {open}, the state's control_open, a request refused "control closed"). The driver's page
// shows it, checked; a viewer's hides it. Unchecked, the server's state says closed (a raw
// viewer socket beside the pages reads it); once the driver has left, the viewer's page says
// "Control is closed" and a request is refused. The control link's page comes back showing
// the box unchecked, checks it; the viewer asks it, and unanswered for 20 s (the page's clock
// jumped) may ask again; once it has left the viewer asks and drives. Every wait is bounded
// and waits for what the page or the socket shows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openPage, closePage } from './browser.mjs';
import { api, Client, wsUrl } from '../server/harness.mjs';

const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);

// What the page's classroom shows, for the checks and for a timeout's message.
const shows = (page) => page.evaluate(() => {
  const $ = (s) => document.querySelector(s), s = window.softcast?.st.state;
  return {
    role: s?.role, driver: s?.driver, control_open: s?.control_open, roleText: $('#role').textContent,
    rowHidden: $('#control-open-row').hidden, checked: $('#control-open').checked,
    request: { hidden: $('#request-control').hidden, text: $('#request-control').textContent, disabled: $('#request-control').disabled },
  };
});

// Wait for fn(arg) in the page (at most ms); on timeout say what the page showed then.
const until = (page, fn, arg, what, ms = 20000) =>
  page.waitForFunction(fn, arg, { timeout: ms, polling: 50 }).catch(async (e) => {
    const seen = await shows(page).catch(() => null);
    throw new Error(`timeout waiting for ${what}: ${e.message.split('\n')[0]}; page: ${JSON.stringify(seen)}`);
  });

test('the driver closes control from its checkbox: a viewer cannot take it while nobody drives; checked again, it can',
  { timeout: 150000 }, async () => {
    const env = await openPage(['--dims', '24x24x16']);
    const { srv, browser } = env;
    let watcher;
    try {
      const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
      // A page of its own (context) per link; actions wait at most 15 s.
      // clock: the page's timers under Playwright's clock (time still flows; a test may jump it).
      const open = async (url, role, { clock = false } = {}) => {
        const ctx = await browser.newContext({ viewport: { width: 1000, height: 650 } });
        ctx.setDefaultTimeout(15000);
        ctx.setDefaultNavigationTimeout(15000);
        if (clock) await ctx.clock.install();
        const page = await ctx.newPage();
        await page.goto(`${srv.base}/${new URL(url).search}`);
        await until(page, (r) => window.softcast?.st.state?.role === r && !document.querySelector('#badge').hidden, role,
          `the page's first state as ${role}`, 30000);
        return page;
      };
      // A raw viewer socket: the server's own word, whatever the pages make of it.
      watcher = await new Client(wsUrl(s, s.view_token), { decode: false }).open();
      await watcher.until(() => lastState(watcher), 10000, 'the watcher\'s state');
      assert.equal(lastState(watcher).control_open, true, 'open unless closed');

      // The driver's page: the row shown, the box checked (open), no request button.
      const driver = await open(s.control_url, 'driver');
      let d = await shows(driver);
      assert.equal(d.rowHidden, false, `the driver's page hides the control-open row: ${JSON.stringify(d)}`);
      assert.ok(await driver.locator('#control-open-row').isVisible(), 'the control-open row is not visible to the driver');
      assert.equal(d.checked, true, 'the checkbox starts unchecked on an open session');
      assert.equal(d.request.hidden, true, 'the driver is offered "Request control"');

      // A viewer's page: the row hidden, the request button there.
      const viewer = await open(s.join_url, 'viewer', { clock: true });
      await until(viewer, () => window.softcast.st.state.driver !== null, null, 'the viewer sees a driver');
      let v = await shows(viewer);
      assert.equal(v.rowHidden, true, `a viewer's page shows the control-open row: ${JSON.stringify(v)}`);
      assert.equal(await viewer.locator('#control-open-row').isVisible(), false, 'the control-open row is visible to a viewer');
      assert.deepEqual(v.request, { hidden: false, text: 'Request control', disabled: false });

      // Unchecked: the server's state says closed, to every client; the driver's box stays
      // unchecked through the state that comes back. (The driver first hears of the viewer:
      // a state on its way would set the box back as it is clicked.)
      await until(driver, () => window.softcast.st.state.clients === 3, null, 'the driver hears of the viewer');
      await driver.uncheck('#control-open');
      await watcher.until(() => lastState(watcher)?.control_open === false, 10000, 'control_open false in the server\'s state');
      await until(driver, () => window.softcast.st.state.control_open === false, null, 'the driver\'s page told control is closed');
      assert.equal(await driver.locator('#control-open').isChecked(), false, 'the driver\'s box checked again after the server\'s state');
      await until(viewer, () => window.softcast.st.state.control_open === false, null, 'the viewer\'s page told control is closed');
      // While a driver is there the viewer may still ask it: closed is for when nobody drives.
      v = await shows(viewer);
      assert.deepEqual(v.request, { hidden: false, text: 'Request control', disabled: false },
        'the viewer cannot ask a present driver once control is closed');
      assert.equal(v.rowHidden, true);

      // The driver leaves: nobody drives, and the viewer's page says control is closed; a
      // request (the button is disabled: sent by the page's own connection) is refused.
      await driver.context().close();
      await watcher.until(() => lastState(watcher)?.driver === null, 10000, 'the server says nobody drives');
      await until(viewer, () => window.softcast.st.state.driver === null &&
        document.querySelector('#request-control').textContent === 'Control is closed',
      null, 'the viewer\'s button says "Control is closed"');
      v = await shows(viewer);
      assert.deepEqual(v.request, { hidden: false, text: 'Control is closed', disabled: true });
      assert.equal(v.roleText, 'Nobody drives');
      assert.equal(v.rowHidden, true);
      await viewer.evaluate(() => window.softcast.conn.send('request_control'));
      await until(viewer, () => window.softcast.st.texts.some((t) => t.type === 'error' && t.error === 'control closed'),
        null, 'the request refused "control closed"');
      assert.equal(await viewer.evaluate(() => window.softcast.st.role), 'viewer');
      assert.equal(lastState(watcher).driver, null, 'a viewer took control while it was closed');

      // The control link's page again: it drives, shows the box unchecked (the server's
      // state, not the markup's default), and checks it: open again, told to every client.
      const driver2 = await open(s.control_url, 'driver');
      d = await shows(driver2);
      assert.equal(d.control_open, false);
      assert.equal(d.rowHidden, false);
      assert.equal(d.checked, false, 'the driver\'s page shows control open while the server says closed');
      await until(viewer, () => window.softcast.st.state.driver !== null &&
        document.querySelector('#request-control').textContent === 'Request control' &&
        !document.querySelector('#request-control').disabled,
      null, 'the viewer may ask the driver again');
      await until(driver2, () => window.softcast.st.state.clients === 3, null, 'the new driver\'s state');
      await driver2.check('#control-open');
      await watcher.until(() => lastState(watcher)?.control_open === true, 10000, 'control_open true in the server\'s state');
      await until(viewer, () => window.softcast.st.state.control_open === true, null, 'the viewer\'s page told control is open');
      assert.equal(await driver2.locator('#control-open').isChecked(), true);

      // The viewer asks this driver, which does not answer: the button waits. Then the
      // driver leaves: the request is moot and the button may be used again.
      await viewer.click('#request-control');
      await until(driver2, () => document.querySelectorAll('#requests [data-from]').length === 1, null,
        'the driver shown the viewer\'s request');
      v = await shows(viewer);
      assert.deepEqual(v.request, { hidden: false, text: 'Asked the driver', disabled: true });
      // Unanswered for 20 s (the page's clock jumped): the viewer may ask again.
      await viewer.clock.fastForward(21000);
      await until(viewer, () => document.querySelector('#request-control').textContent === 'Ask again' &&
        !document.querySelector('#request-control').disabled, null, 'the unanswered request may be made again');
      await viewer.click('#request-control');
      await until(viewer, () => document.querySelector('#request-control').textContent === 'Asked the driver', null,
        'asked again');
      await until(driver2, () => document.querySelectorAll('#requests [data-from]').length === 1, null,
        'the second request shown once (the driver\'s list holds one per viewer)');

      // The driver leaves again: with control open the viewer asks and drives at once, and
      // now its own page shows the row, checked.
      await driver2.context().close();
      await until(viewer, () => window.softcast.st.state.driver === null, null, 'nobody drives again');
      v = await shows(viewer);
      assert.deepEqual(v.request, { hidden: false, text: 'Request control', disabled: false },
        'with control open and nobody driving the viewer\'s button is not "Request control"');
      await viewer.click('#request-control');
      await until(viewer, () => window.softcast.st.role === 'driver', null, 'the viewer drives (control open)');
      const vid = await viewer.evaluate(() => window.softcast.st.state.client_id);
      await watcher.until(() => lastState(watcher)?.driver === vid, 10000, 'the server says the viewer drives');
      v = await shows(viewer);
      assert.equal(v.rowHidden, false, 'the new driver\'s page hides the control-open row');
      assert.equal(v.checked, true);
      assert.equal(v.request.hidden, true);
      await viewer.context().close();
    } finally {
      await watcher?.close().catch(() => {});
      await closePage(env);
    }
  });
