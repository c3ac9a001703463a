/* dicom.cpp: a DICOM series read through GDCM (Debian's libgdcm, the maintained C++
 * library: every usual transfer syntax, JPEG 2000 and JPEG-LS included), behind the C
 * function vol_dicom_read (volume_internal.h; sim_volume_load_dicom in volume_load.c).
 *
 * 1. Scan: every regular file under the folder (recursively, at most VD_MAX_DEPTH deep and
 *    VD_MAX_FILES files; links are not followed) is read up to its pixel data. Files that
 *    are not DICOM, and DICOM objects without an image (DICOMDIR, reports), are counted
 *    and skipped. A multi-frame image whose frames are placed by functional groups
 *    (Enhanced CT and MR) gives a slice per frame. Images are grouped by SeriesInstanceUID.
 * 2. Pick: the series asked for, else the one with the most slices.
 * 3. Geometry: the slice normal n = row x column direction (ImageOrientationPatient); slices
 *    sorted by ImagePositionPatient . n. Refused, each with its own message: mixed sizes or
 *    orientations, gantry tilt (the positions do not advance along n), duplicate positions,
 *    gaps (missing slices) and uneven spacing. Sizes are checked against the limits before
 *    the volume is allocated.
 * 4. Pixels: each file decoded by gdcm::ImageReader (once for all its frames), BitsStored
 *    honoured (sign-extended or masked), then HU = stored x RescaleSlope + RescaleIntercept,
 *    per slice.
 * 5. Orientation: the lattice (i along the rows, j down the columns, k along n) has the
 *    directions r, c, n in DICOM's patient frame (LPS: x toward the patient's left, y
 *    posterior); negating x and y gives RAS, and vol_to_ras turns it to the common lattice.
 * Nothing identifying the patient is read into a message or the info: only the series UID,
 * modality, instance numbers, sizes, positions and spacings. No C++ exception leaves here. */
#include "volume_internal.h"

#if SIM_HAVE_DICOM

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gdcmImageReader.h>
#include <gdcmReader.h>
#include <gdcmSequenceOfItems.h>
#include <gdcmStringFilter.h>
#include <gdcmTag.h>
#include <gdcmTrace.h>

#include "../core/sc_base.h"

namespace
{

const int VD_MAX_DEPTH = 16;     // folders below the one given
const int VD_MAX_FILES = 100000; // files looked at in all

struct vd_slice {
    std::string path, uid, modality;
    int rows = 0, cols = 0, instance = 0, frames = 1, samples = 1;
    int frame = 0; // of a multi-frame (enhanced) image, from 1; 0: a file of one slice
    std::string photometric;
    double ipp[3] = {0, 0, 0}, iop[6] = {0, 0, 0, 0, 0, 0}, ps[2] = {0, 0};
    double slope = 1.0, inter = 0.0;
    int has_ipp = 0, has_iop = 0, has_ps = 0;
    double d = 0.0; // position along the series' slice normal
};

struct vd_scan {
    int files = 0, not_dicom = 0, no_image = 0, skipped_links = 0, truncated = 0;
    std::vector<vd_slice> images;
};

struct vd_err {
    char *buf;
    size_t sz;
};

// Numbers of a DICOM value ("a\b\c"); returns how many were read.
int parse_numbers(const std::string &s, double *out, int max)
{
    int n = 0;
    const char *p = s.c_str();
    while (n < max && *p) {
        char *end = nullptr;
        double v = std::strtod(p, &end);
        if (end == p)
            break;
        out[n++] = v;
        p = end;
        while (*p == ' ')
            p++;
        if (*p != '\\')
            break;
        p++;
    }
    return n;
}

// "instance 3", or "instance 3 frame 7" for a frame of a multi-frame image: for messages.
std::string name_of(const vd_slice &s)
{
    char b[48];
    if (s.frame)
        std::snprintf(b, sizeof b, "instance %d frame %d", s.instance, s.frame);
    else
        std::snprintf(b, sizeof b, "instance %d", s.instance);
    return b;
}

// "instances 3 and 4", or each named whole when either is a frame.
std::string names_of(const vd_slice &a, const vd_slice &b)
{
    if (!a.frame && !b.frame) {
        char t[48];
        std::snprintf(t, sizeof t, "instances %d and %d", a.instance, b.instance);
        return t;
    }
    return name_of(a) + " and " + name_of(b);
}

// Tag t's text in a data set (nested ones too, which StringFilter cannot read), its
// padding cut; "" when absent.
std::string text_in(const gdcm::DataSet &ds, const gdcm::Tag &t)
{
    if (!ds.FindDataElement(t))
        return std::string();
    const gdcm::ByteValue *bv = ds.GetDataElement(t).GetByteValue();
    if (!bv || !bv->GetPointer())
        return std::string();
    std::string v(bv->GetPointer(), bv->GetLength());
    while (!v.empty() && (v.back() == ' ' || v.back() == '\0'))
        v.pop_back();
    return v;
}

// Item k (from 1) of the sequence t in ds, copied into out; false when there is none.
bool item_in(const gdcm::DataSet &ds, const gdcm::Tag &t, size_t k, gdcm::DataSet &out)
{
    if (!ds.FindDataElement(t))
        return false;
    gdcm::SmartPointer<gdcm::SequenceOfItems> sq = ds.GetDataElement(t).GetValueAsSQ();
    if (!sq || k < 1 || sq->GetNumberOfItems() < k)
        return false;
    out = sq->GetItem(k).GetNestedDataSet();
    return true;
}

// A functional group's value for one frame (an enhanced image's macro seq holding val): the
// frame's own group first, then the shared one; "" when neither has it.
std::string group_value(const gdcm::DataSet &per, const gdcm::DataSet *shared, gdcm::Tag seq,
                        gdcm::Tag val)
{
    gdcm::DataSet item;
    if (item_in(per, seq, 1, item)) {
        std::string v = text_in(item, val);
        if (!v.empty())
            return v;
    }
    return shared && item_in(*shared, seq, 1, item) ? text_in(item, val) : std::string();
}

// A multi-frame image's frames as slices, placed by its functional groups (Enhanced CT and
// MR, Legacy Converted Enhanced: PlanePosition per frame; PlaneOrientation, PixelMeasures
// and PixelValueTransformation per frame or shared; the top level's where neither says).
// False, out untouched, when a frame has no position (a cine, a multi-frame projection).
bool expand_frames(const gdcm::DataSet &ds, const vd_slice &s, std::vector<vd_slice> &out)
{
    gdcm::DataSet shared_ds;
    const gdcm::DataSet *shared =
        item_in(ds, gdcm::Tag(0x5200, 0x9229), 1, shared_ds) ? &shared_ds : nullptr;
    const gdcm::Tag per_frame(0x5200, 0x9230);
    if (!ds.FindDataElement(per_frame))
        return false;
    // Once: an encoding GDCM parses on demand would be parsed again for every frame.
    gdcm::SmartPointer<gdcm::SequenceOfItems> items = ds.GetDataElement(per_frame).GetValueAsSQ();
    if (!items || items->GetNumberOfItems() < (size_t)s.frames)
        return false;
    std::vector<vd_slice> frames;
    for (int k = 1; k <= s.frames; k++) {
        const gdcm::DataSet &per = items->GetItem((size_t)k).GetNestedDataSet();
        vd_slice f = s;
        f.frames = 1;
        f.frame = k;
        auto group = [&](uint16_t sg, uint16_t se, uint16_t vg, uint16_t ve) {
            return group_value(per, shared, gdcm::Tag(sg, se), gdcm::Tag(vg, ve));
        };
        if (parse_numbers(group(0x0020, 0x9113, 0x0020, 0x0032), f.ipp, 3) != 3)
            return false;
        f.has_ipp = 1;
        double iop[6], ps[2], v;
        if (parse_numbers(group(0x0020, 0x9116, 0x0020, 0x0037), iop, 6) == 6) {
            std::memcpy(f.iop, iop, sizeof iop);
            f.has_iop = 1;
        }
        if (parse_numbers(group(0x0028, 0x9110, 0x0028, 0x0030), ps, 2) == 2) {
            std::memcpy(f.ps, ps, sizeof ps);
            f.has_ps = 1;
        }
        if (parse_numbers(group(0x0028, 0x9145, 0x0028, 0x1053), &v, 1) == 1)
            f.slope = v;
        if (parse_numbers(group(0x0028, 0x9145, 0x0028, 0x1052), &v, 1) == 1)
            f.inter = v;
        frames.push_back(f);
    }
    out.insert(out.end(), frames.begin(), frames.end());
    return true;
}

void walk(const std::string &dir, int depth, vd_scan &sc, std::vector<std::string> &files)
{
    DIR *d = opendir(dir.c_str());
    if (!d)
        return;
    std::vector<std::string> names;
    while (struct dirent *e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
            names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end()); // the same order on every file system
    for (const std::string &nm : names) {
        std::string p = dir + "/" + nm;
        struct stat st;
        if (lstat(p.c_str(), &st) != 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            sc.skipped_links++;
        } else if (S_ISDIR(st.st_mode)) {
            if (depth < VD_MAX_DEPTH && nm != "__MACOSX")
                walk(p, depth + 1, sc, files);
        } else if (S_ISREG(st.st_mode)) {
            if ((int)files.size() >= VD_MAX_FILES) {
                sc.truncated = 1;
                return;
            }
            files.push_back(p);
        }
    }
}

// One file's header, up to its pixel data. 0: not DICOM; 1: DICOM, no image; 2: an image,
// appended to out: one slice, a multi-frame image's frames each placed, or (none placed) the
// image whole with its frame count, which check_slices refuses.
int read_header(const std::string &path, std::vector<vd_slice> &out)
{
    vd_slice s;
    gdcm::Reader r;
    r.SetFileName(path.c_str());
    std::set<gdcm::Tag> skip;
    if (!r.ReadUpToTag(gdcm::Tag(0x7fe0, 0x0010), skip))
        return 0;
    const gdcm::DataSet &ds = r.GetFile().GetDataSet();
    if (ds.IsEmpty())
        return 0;
    gdcm::StringFilter sf;
    sf.SetFile(r.GetFile());
    auto str = [&](uint16_t g, uint16_t e) {
        gdcm::Tag t(g, e);
        if (!ds.FindDataElement(t) || ds.GetDataElement(t).IsEmpty())
            return std::string();
        std::string v = sf.ToString(t);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\0'))
            v.pop_back();
        return v;
    };
    s.path = path;
    s.rows = std::atoi(str(0x0028, 0x0010).c_str());
    s.cols = std::atoi(str(0x0028, 0x0011).c_str());
    if (s.rows <= 0 || s.cols <= 0)
        return 1;
    s.uid = str(0x0020, 0x000e);
    s.modality = str(0x0008, 0x0060);
    s.instance = std::atoi(str(0x0020, 0x0013).c_str());
    std::string fr = str(0x0028, 0x0008), spp = str(0x0028, 0x0002);
    s.frames = fr.empty() ? 1 : std::atoi(fr.c_str());
    s.samples = spp.empty() ? 1 : std::atoi(spp.c_str());
    s.photometric = str(0x0028, 0x0004);
    s.has_ipp = parse_numbers(str(0x0020, 0x0032), s.ipp, 3) == 3;
    s.has_iop = parse_numbers(str(0x0020, 0x0037), s.iop, 6) == 6;
    s.has_ps = parse_numbers(str(0x0028, 0x0030), s.ps, 2) == 2;
    double v;
    if (parse_numbers(str(0x0028, 0x1053), &v, 1) == 1)
        s.slope = v;
    if (parse_numbers(str(0x0028, 0x1052), &v, 1) == 1)
        s.inter = v;
    if (s.frames <= 1 || !expand_frames(ds, s, out))
        out.push_back(s);
    return 2;
}

// The files under dir, or dir itself when it is a file (read alone).
vd_scan scan_folder(const char *dir)
{
    vd_scan sc;
    std::vector<std::string> files;
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISREG(st.st_mode))
        files.push_back(dir);
    else
        walk(dir, 0, sc, files);
    sc.files = (int)files.size();
    for (const std::string &f : files) {
        int k = read_header(f, sc.images);
        if (k == 0)
            sc.not_dicom++;
        else if (k == 1)
            sc.no_image++;
    }
    return sc;
}

struct vd_series {
    std::string uid;
    std::vector<vd_slice> slices;
};

std::vector<vd_series> group_series(const vd_scan &sc)
{
    std::map<std::string, size_t> at;
    std::vector<vd_series> out;
    for (const vd_slice &s : sc.images) {
        auto it = at.find(s.uid);
        if (it == at.end()) {
            at[s.uid] = out.size();
            out.push_back(vd_series{s.uid, {}});
            it = at.find(s.uid);
        }
        out[it->second].slices.push_back(s);
    }
    // The most slices first; ties by UID, so the choice never depends on the file order.
    std::sort(out.begin(), out.end(), [](const vd_series &a, const vd_series &b) {
        return a.slices.size() != b.slices.size() ? a.slices.size() > b.slices.size()
                                                  : a.uid < b.uid;
    });
    return out;
}

std::string list_series(const std::vector<vd_series> &all)
{
    std::string s;
    for (size_t i = 0; i < all.size() && i < 8; i++) {
        char b[160];
        std::snprintf(b, sizeof b, "%s%s (%zu slices)", i ? ", " : "",
                      all[i].uid.empty() ? "(no UID)" : all[i].uid.c_str(), all[i].slices.size());
        s += b;
    }
    if (all.size() > 8)
        s += ", ...";
    return s;
}

// The empty folder, a folder of no DICOM, of DICOM without images: each says what to give.
sim_status check_found(const char *dir, const vd_scan &sc, vd_err e)
{
    const char *give = "give the folder that holds the series' image files (or a .zip of it)";
    if (sc.files == 0)
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: an empty folder: no files in it%s; %s", dir,
                                   sc.skipped_links ? " (links are not followed)" : "", give);
    if (sc.images.empty() && sc.no_image == 0)
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: not DICOM: none of its %d files is a DICOM file; give a "
                                   "DICOM series (a folder or a .zip of one) or a NIfTI file "
                                   "(.nii, .nii.gz)",
                                   dir, sc.files);
    if (sc.images.empty())
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: no image data: its %d DICOM files hold no images (a "
                                   "DICOMDIR, reports or other objects without pixels); %s",
                                   dir, sc.no_image, give);
    return SIM_OK;
}

double dot3(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

// What every slice of the series must share: one size, one orientation, one spacing in the
// plane, one frame each, grey values, a position. Sets the normal and each slice's d.
sim_status check_slices(const char *dir, vd_series &se, double n[3], vd_err e)
{
    const char *uid = se.uid.c_str();
    const vd_slice &a = se.slices[0];
    for (vd_slice &s : se.slices) {
        if (s.frames != 1)
            return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                       "%s: series %s: instance %d holds %d frames without a "
                                       "position each (modality %s): a cine or a projection, "
                                       "not a stack of slices; give a CT series",
                                       dir, uid, s.instance, s.frames,
                                       s.modality.empty() ? "not given" : s.modality.c_str());
        if (s.samples != 1 || (s.photometric != "MONOCHROME2" && s.photometric != "MONOCHROME1"))
            return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                       "%s: series %s: %s is not a greyscale image (%s, %d "
                                       "samples a pixel): a CT series is MONOCHROME2",
                                       dir, uid, name_of(s).c_str(), s.photometric.c_str(),
                                       s.samples);
        if (!s.has_ipp || !s.has_iop || !s.has_ps)
            return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                       "%s: series %s: %s has no %s: the slice cannot be "
                                       "placed; export the series from the scanner's archive",
                                       dir, uid, name_of(s).c_str(),
                                       !s.has_ipp   ? "ImagePositionPatient"
                                       : !s.has_iop ? "ImageOrientationPatient"
                                                    : "PixelSpacing");
        if (s.rows != a.rows || s.cols != a.cols)
            return (sim_status)sc_fail(
                e.buf, e.sz, SIM_ERR_FORMAT,
                "%s: series %s: mixed sizes: slices of %dx%d and %dx%d (columns x rows, "
                "%s); a series needs one size: pick the series with --series or export it "
                "again",
                dir, uid, a.cols, a.rows, s.cols, s.rows, names_of(a, s).c_str());
        double diff = 0.0;
        for (int i = 0; i < 6; i++)
            diff = std::fmax(diff, std::fabs(s.iop[i] - a.iop[i]));
        if (diff > 1e-4 || std::fabs(s.ps[0] - a.ps[0]) > 1e-4 ||
            std::fabs(s.ps[1] - a.ps[1]) > 1e-4)
            return (sim_status)sc_fail(
                e.buf, e.sz, SIM_ERR_FORMAT,
                "%s: series %s: mixed orientations or pixel spacings (%s): a localizer or a "
                "reformat in the series? give one stack of parallel slices",
                dir, uid, names_of(a, s).c_str());
    }
    const double *r = a.iop, *c = a.iop + 3;
    n[0] = r[1] * c[2] - r[2] * c[1];
    n[1] = r[2] * c[0] - r[0] * c[2];
    n[2] = r[0] * c[1] - r[1] * c[0];
    double nl = std::sqrt(dot3(n, n));
    if (!(nl > 0.99 && nl < 1.01) || std::fabs(dot3(r, c)) > 1e-3 || !(a.ps[0] > 0) ||
        !(a.ps[1] > 0))
        return (sim_status)sc_fail(
            e.buf, e.sz, SIM_ERR_FORMAT,
            "%s: series %s: ImageOrientationPatient (%g\\%g\\%g\\%g\\%g\\%g) "
            "or PixelSpacing (%g\\%g) is not valid",
            dir, uid, r[0], r[1], r[2], c[0], c[1], c[2], a.ps[0], a.ps[1]);
    for (int i = 0; i < 3; i++)
        n[i] /= nl;
    for (vd_slice &s : se.slices)
        s.d = dot3(s.ipp, n);
    std::sort(se.slices.begin(), se.slices.end(),
              [](const vd_slice &x, const vd_slice &y) { return x.d < y.d; });
    return SIM_OK;
}

// The stack along the normal: no tilt, no duplicate, no gap, one spacing (*dz).
sim_status check_stack(const char *dir, const vd_series &se, const double n[3], double *dz,
                       vd_err e)
{
    const char *uid = se.uid.c_str();
    const std::vector<vd_slice> &s = se.slices;
    size_t k = s.size();
    if (k < 2)
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: series %s: a single slice: a volume needs at least 2", dir,
                                   uid);
    double v[3], along = 0.0;
    for (int i = 0; i < 3; i++)
        v[i] = s[k - 1].ipp[i] - s[0].ipp[i];
    along = dot3(v, n);
    double perp = std::sqrt(std::fmax(0.0, dot3(v, v) - along * along));
    double tilt = std::atan2(perp, std::fabs(along)) * 180.0 / 3.14159265358979323846;
    if (tilt > 0.05)
        return (sim_status)sc_fail(
            e.buf, e.sz, SIM_ERR_FORMAT,
            "%s: series %s: gantry tilt: the slices advance %.2f degrees off their normal "
            "(ImageOrientationPatient is not perpendicular to the stacking direction); correct "
            "the tilt first (dcm2niix does) and give the NIfTI",
            dir, uid, tilt);
    std::vector<double> gaps;
    for (size_t i = 1; i < k; i++) {
        double g = s[i].d - s[i - 1].d;
        if (g < 0.01)
            return (sim_status)sc_fail(
                e.buf, e.sz, SIM_ERR_FORMAT,
                "%s: series %s: duplicate slices: %s are both at %.2f mm along the slice "
                "normal; give a folder with one copy of each slice",
                dir, uid, names_of(s[i - 1], s[i]).c_str(), s[i].d);
        gaps.push_back(g);
    }
    std::vector<double> sorted = gaps;
    std::sort(sorted.begin(), sorted.end());
    double med = sorted[sorted.size() / 2], tol = std::fmax(0.01, 0.01 * med);
    for (size_t i = 0; i < gaps.size(); i++)
        if (gaps[i] > 1.5 * med)
            return (sim_status)sc_fail(
                e.buf, e.sz, SIM_ERR_FORMAT,
                "%s: series %s: missing slices: a gap of %.2f mm between %.2f and %.2f mm "
                "(%s) where the other slices are %.2f mm apart (about %d missing); give the "
                "complete series",
                dir, uid, gaps[i], s[i].d, s[i + 1].d, names_of(s[i], s[i + 1]).c_str(), med,
                (int)std::lround(gaps[i] / med) - 1);
    if (sorted.back() - sorted.front() > tol) {
        std::string found;
        double last = -1.0;
        int listed = 0;
        for (double g : sorted)
            if (g - last > tol && listed < 6) {
                char b[32];
                std::snprintf(b, sizeof b, "%s%.3f", listed ? ", " : "", g);
                found += b;
                last = g;
                listed++;
            }
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: series %s: uneven spacing: slices %s mm apart; the "
                                   "volume needs one spacing: resample the series to even "
                                   "slices (dcm2niix, then give the NIfTI)",
                                   dir, uid, found.c_str());
    }
    *dz = (s[k - 1].d - s[0].d) / (double)(k - 1);
    return SIM_OK;
}

sim_status check_limits(const char *dir, const vd_series &se, const sim_volume_limits *lim,
                        vd_err e)
{
    sim_volume_limits l = sim_default_volume_limits();
    if (lim && lim->max_elements > 0)
        l.max_elements = lim->max_elements;
    if (lim && lim->max_dim > 0)
        l.max_dim = lim->max_dim;
    long long nx = se.slices[0].cols, ny = se.slices[0].rows, nz = (long long)se.slices.size();
    if (nx > l.max_dim || ny > l.max_dim || nz > l.max_dim)
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_LIMIT,
                                   "%s: dims %lldx%lldx%lld: an axis is longer than the limit %d",
                                   dir, nx, ny, nz, l.max_dim);
    unsigned long long n = (unsigned long long)(nx * ny * nz);
    if (n > (unsigned long long)l.max_elements)
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_LIMIT,
                                   "%s: dims %lldx%lldx%lld: %llu elements exceed the limit %zu",
                                   dir, nx, ny, nz, n, l.max_elements);
    return SIM_OK;
}

// Stored value of pixel i in buf, honouring BitsStored.
double stored_value(const char *buf, size_t i, const gdcm::PixelFormat &pf)
{
    int bits = pf.GetBitsStored(), alloc = pf.GetBitsAllocated();
    long long raw = 0;
    if (alloc == 8)
        raw = (unsigned char)buf[i];
    else if (alloc == 16) {
        uint16_t u;
        std::memcpy(&u, buf + 2 * i, 2);
        raw = u;
    } else {
        uint32_t u;
        std::memcpy(&u, buf + 4 * i, 4);
        raw = u;
    }
    if (bits <= 0 || bits > alloc)
        bits = alloc;
    raw &= (long long)((1ULL << bits) - 1);
    if (pf.GetPixelRepresentation() == 1 && (raw >> (bits - 1)) & 1)
        raw -= (long long)(1ULL << bits);
    return (double)raw;
}

// One image file decoded: its stored values, frame after frame (a multi-frame image's frames
// are read from one decode, kept while the next slice is of the same file).
struct vd_decoded {
    std::string path;
    std::vector<char> buf;
    gdcm::PixelFormat pf;
    unsigned frames = 1;
};

sim_status decode(const char *dir, const vd_series &se, const vd_slice &s, vd_decoded &d, vd_err e)
{
    if (d.path == s.path)
        return SIM_OK;
    d.path.clear();
    size_t plane = (size_t)s.cols * (size_t)s.rows;
    gdcm::ImageReader ir;
    ir.SetFileName(s.path.c_str());
    if (!ir.Read())
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: series %s: %s: its pixel data cannot be read or decoded "
                                   "(missing, truncated or an unknown compression)",
                                   dir, se.uid.c_str(), name_of(s).c_str());
    const gdcm::Image &img = ir.GetImage();
    d.pf = img.GetPixelFormat();
    int alloc = d.pf.GetBitsAllocated();
    unsigned frames_held = img.GetNumberOfDimensions() > 2 ? img.GetDimension(2) : 1;
    if (d.pf.GetSamplesPerPixel() != 1 || (alloc != 8 && alloc != 16 && alloc != 32) ||
        img.GetDimension(0) != (unsigned)s.cols || img.GetDimension(1) != (unsigned)s.rows ||
        img.GetBufferLength() < frames_held * plane * (size_t)(alloc / 8))
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: series %s: %s: pixels of %d bits, %ux%u, %u frames: not "
                                   "what its header says",
                                   dir, se.uid.c_str(), name_of(s).c_str(), alloc,
                                   img.GetDimension(0), img.GetDimension(1), frames_held);
    d.buf.resize(img.GetBufferLength());
    if (!img.GetBuffer(d.buf.data()))
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                   "%s: series %s: %s: its pixel data cannot be decoded", dir,
                                   se.uid.c_str(), name_of(s).c_str());
    d.frames = frames_held;
    d.path = s.path;
    return SIM_OK;
}

sim_status read_pixels(const char *dir, const vd_series &se, float *hu, vd_err e)
{
    size_t plane = (size_t)se.slices[0].cols * (size_t)se.slices[0].rows;
    vd_decoded d;
    for (size_t k = 0; k < se.slices.size(); k++) {
        const vd_slice &s = se.slices[k];
        sim_status st = decode(dir, se, s, d, e);
        if (st != SIM_OK)
            return st;
        size_t bytes = (size_t)(d.pf.GetBitsAllocated() / 8);
        if ((unsigned)std::max(s.frame, 1) > d.frames)
            return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_FORMAT,
                                       "%s: series %s: %s: its pixel data holds %u frames", dir,
                                       se.uid.c_str(), name_of(s).c_str(), d.frames);
        const char *px = d.buf.data() + (s.frame ? (size_t)(s.frame - 1) : 0) * plane * bytes;
        int invert = s.photometric == "MONOCHROME1";
        double top = std::ldexp(1.0, d.pf.GetBitsStored()) - 1.0;
        for (size_t i = 0; i < plane; i++) {
            double v = stored_value(px, i, d.pf);
            if (invert)
                v = top - v;
            hu[k * plane + i] = (float)(v * s.slope + s.inter);
        }
    }
    return SIM_OK;
}

sim_status pick_series(const char *dir, std::vector<vd_series> &all, const char *want,
                       const char *pick_file, size_t *chosen, vd_err e)
{
    *chosen = 0;
    if (!(want && *want) && pick_file) {
        for (size_t i = 0; i < all.size(); i++)
            for (const vd_slice &s : all[i].slices)
                if (s.path == pick_file)
                    *chosen = i;
        return SIM_OK;
    }
    if (!(want && *want))
        return SIM_OK;
    for (size_t i = 0; i < all.size(); i++)
        if (all[i].uid == want) {
            *chosen = i;
            return SIM_OK;
        }
    return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_ARG,
                               "%s: no series with UID %s here; the folder holds %zu: %s", dir,
                               want, all.size(), list_series(all).c_str());
}

void fill_info(sim_volume_info *info, const vd_scan &sc, const std::vector<vd_series> &all,
               const vd_series &se)
{
    if (!info)
        return;
    std::snprintf(info->format, sizeof info->format, "dicom");
    std::snprintf(info->series_uid, sizeof info->series_uid, "%s", se.uid.c_str());
    std::snprintf(info->modality, sizeof info->modality, "%s", se.slices[0].modality.c_str());
    info->series_count = (int)all.size();
    info->slice_count = (int)se.slices.size();
    info->skipped_files = sc.not_dicom + sc.no_image + (int)(sc.images.size() - se.slices.size());
}

sim_status read_series(sim_volume *out, const char *dir, const char *series_uid,
                       const char *pick_file, const sim_volume_limits *lim, sim_volume_info *info,
                       vd_err e)
{
    vd_scan sc = scan_folder(dir);
    sim_status st = check_found(dir, sc, e);
    if (st != SIM_OK)
        return st;
    std::vector<vd_series> all = group_series(sc);
    size_t pick = 0;
    st = pick_series(dir, all, series_uid, pick_file, &pick, e);
    if (st != SIM_OK)
        return st;
    vd_series &se = all[pick];
    double n[3] = {0.0, 0.0, 0.0}, dz = 0.0;
    st = check_slices(dir, se, n, e);
    if (st == SIM_OK)
        st = check_stack(dir, se, n, &dz, e);
    if (st == SIM_OK)
        st = check_limits(dir, se, lim, e);
    if (st != SIM_OK)
        return st;
    const vd_slice &a = se.slices[0];
    size_t count = (size_t)a.cols * (size_t)a.rows * se.slices.size();
    float *hu = (float *)sc_calloc(count, sizeof *hu);
    if (!hu)
        return (sim_status)sc_fail(e.buf, e.sz, SIM_ERR_NOMEM, "%s: out of memory for %zu elements",
                                   dir, count);
    st = read_pixels(dir, se, hu, e);
    if (st != SIM_OK) {
        std::free(hu);
        return st;
    }
    out->nx = a.cols, out->ny = a.rows, out->nz = (int)se.slices.size();
    out->spacing_mm[0] = (float)a.ps[1]; // PixelSpacing: between rows \ between columns
    out->spacing_mm[1] = (float)a.ps[0];
    out->spacing_mm[2] = (float)dz;
    out->hu = hu;
    fill_info(info, sc, all, se);
    // Stored axes i, j, k run along r, c, n in LPS; RAS negates x and y.
    double dir_ras[9];
    for (int w = 0; w < 3; w++) {
        double sgn = w < 2 ? -1.0 : 1.0;
        dir_ras[3 * w + 0] = sgn * a.iop[w];
        dir_ras[3 * w + 1] = sgn * a.iop[3 + w];
        dir_ras[3 * w + 2] = sgn * n[w];
    }
    std::string what = std::string(dir) + ": series " + se.uid + ": ImageOrientationPatient";
    return vol_to_ras(out, dir_ras, what.c_str(), e.buf, e.sz);
}

} // namespace

extern "C" sim_status vol_dicom_read(sim_volume *out, const char *dir, const char *series_uid,
                                     const char *pick_file, const sim_volume_limits *lim,
                                     sim_volume_info *info, char *err, size_t err_sz)
{
    vd_err e = {err, err_sz};
    sim_status st;
    gdcm::Trace::SetWarning(false); // what matters is said in our own messages
    gdcm::Trace::SetError(false);
    gdcm::Trace::SetDebug(false);
    try {
        st = read_series(out, dir, series_uid, pick_file, lim, info, e);
    } catch (const std::exception &x) {
        st = (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: DICOM: %s", dir, x.what());
    } catch (...) {
        st = (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: DICOM: unreadable", dir);
    }
    if (st != SIM_OK)
        sim_volume_free(out);
    return st;
}

#endif /* SIM_HAVE_DICOM */
